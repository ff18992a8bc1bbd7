/* etcd_harness.c - start, probe, signal and remove real etcd clusters. */

#include "etcd_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Closes every fd from `from` up (children must not hold the test
 * framework's pipes open). */
static void close_from(int from)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, from, ~0u, 0) == 0)
        return;
#endif
    for (int fd = from; fd < 4096; fd++)
        close(fd);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static void rm_rf(const char *dir)
{
    if (dir[0])
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- guard: removes the data when the test process dies unexpectedly ---- */

static void guard_main(int rfd, const char *dir)
{
    pid_t pids[64];
    int np = 0;
    char buf[256];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(rfd, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = 0;
        char *nl;
        while ((nl = strchr(buf, '\n'))) {
            *nl = 0;
            if (buf[0] == 'P' && np < 64)
                pids[np++] = (pid_t)atoi(buf + 2);
            else if (buf[0] == 'D') /* eh_stop cleaned up */
                _exit(0);
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, have - used + 1);
            have -= used;
        }
    }
    /* EOF without "D": the test process is gone. Members die through
     * PDEATHSIG; make sure, then remove the data. */
    for (int i = 0; i < np; i++)
        kill(pids[i], SIGKILL);
    for (int i = 0; i < np; i++)
        for (int t = 0; t < 200 && kill(pids[i], 0) == 0; t++)
            nap_ms(10);
    rm_rf(dir);
    _exit(0);
}

static int guard_start(eh_cluster *c)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    fflush(NULL);
    pid_t g = fork();
    if (g < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (g == 0) {
        /* Own session: a kill of the test's process group spares it. */
        setsid();
        dup2(p[0], 3);
        close_from(4);
        guard_main(3, c->dir);
    }
    close(p[0]);
    c->guard = g;
    c->guard_fd = p[1];
    return 0;
}

static void guard_tell(eh_cluster *c, const char *msg)
{
    if (c->guard_fd >= 0) {
        ssize_t w = write(c->guard_fd, msg, strlen(msg));
        (void)w;
    }
}

/* ---- ports and members ---- */

/* 2n distinct free loopback ports: all bound at once, then released. */
static int pick_ports(eh_cluster *c)
{
    int fds[2 * EH_MAX], ok = 0;
    for (int i = 0; i < 2 * c->n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof a;
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) < 0 ||
            getsockname(fds[i], (struct sockaddr *)&a, &l) < 0) {
            for (int j = 0; j <= i; j++)
                if (fds[j] >= 0)
                    close(fds[j]);
            return -1;
        }
        if (i < c->n)
            c->client_port[i] = ntohs(a.sin_port);
        else
            c->peer_port[i - c->n] = ntohs(a.sin_port);
        ok++;
    }
    for (int i = 0; i < ok; i++)
        close(fds[i]);
    return 0;
}

static pid_t spawn_member(eh_cluster *c, int i, const char *initial)
{
    char name[16], data[300], log[300], curl_[64], purl[64];
    snprintf(name, sizeof name, "m%d", i);
    snprintf(data, sizeof data, "%s/m%d", c->dir, i);
    snprintf(log, sizeof log, "%s/m%d.log", c->dir, i);
    snprintf(curl_, sizeof curl_, "http://127.0.0.1:%d", c->client_port[i]);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", c->peer_port[i]);
    char token[64];
    snprintf(token, sizeof token, "cohort-test-%d-%s", (int)getpid(), strrchr(c->dir, '-') + 1);
    fflush(NULL);
    pid_t p = fork();
    if (p != 0)
        return p;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    close_from(3);
    /* Short heartbeat/election: failover tests take well under a second to
     * re-elect. bcrypt cost 4: auth tests do not spend seconds hashing. */
    execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl_,
           "--advertise-client-urls", curl_, "--listen-peer-urls", purl,
           "--initial-advertise-peer-urls", purl, "--initial-cluster", initial,
           "--initial-cluster-state", "new", "--initial-cluster-token", token,
           "--heartbeat-interval", "50", "--election-timeout", "500", "--bcrypt-cost", "4",
           "--logger", "zap", "--log-outputs", "stderr", "--log-level", "info", (char *)NULL);
    fprintf(stderr, "exec etcd: %s\n", strerror(errno));
    _exit(127);
}

static size_t sink(char *p, size_t sz, size_t nm, void *arg)
{
    char **cur = arg;
    size_t n = sz * nm;
    /* cur[0] = write position, cur[1] = end */
    size_t room = (size_t)(cur[1] - cur[0]);
    size_t k = n < room ? n : room;
    memcpy(cur[0], p, k);
    cur[0] += k;
    return n;
}

int eh_post(const eh_cluster *c, int i, const char *path, const char *body, const char *auth,
            char *out, size_t cap)
{
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    char url[128], hdr[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", c->client_port[i], path);
    struct curl_slist *hl = NULL;
    if (auth) {
        snprintf(hdr, sizeof hdr, "Authorization: %s", auth);
        hl = curl_slist_append(hl, hdr);
    }
    char *cur[2] = {out, out + (cap ? cap - 1 : 0)};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (hl)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, cur);
    CURLcode cc = curl_easy_perform(h);
    long code = -1;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (cap)
        *cur[0] = 0;
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return (int)code;
}

static void log_tail(const eh_cluster *c, int i)
{
    char path[300], buf[2048];
    snprintf(path, sizeof path, "%s/m%d.log", c->dir, i);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    fprintf(stderr, "---- etcd m%d log tail ----\n%s\n", i, buf);
}

static void kill_members(eh_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->pid[i] > 0) {
            kill(c->pid[i], SIGKILL);
            waitpid(c->pid[i], NULL, 0);
            c->pid[i] = 0;
        }
}

/* One attempt on fresh ports: 1 ok, 0 retry (a port was taken), -1 fail. */
static int start_once(eh_cluster *c, double deadline)
{
    if (pick_ports(c) < 0)
        return -1;
    char *initial = c->initial;
    size_t o = 0;
    for (int i = 0; i < c->n; i++)
        o += (size_t)snprintf(initial + o, sizeof c->initial - o, "%sm%d=http://127.0.0.1:%d",
                              i ? "," : "", i, c->peer_port[i]);
    for (int i = 0; i < c->n; i++) {
        char sub[300];
        snprintf(sub, sizeof sub, "%s/m%d", c->dir, i);
        rm_rf(sub);
        c->pid[i] = spawn_member(c, i, initial);
        if (c->pid[i] < 0)
            return -1;
        char msg[32];
        snprintf(msg, sizeof msg, "P %d\n", (int)c->pid[i]);
        guard_tell(c, msg);
    }
    /* Readiness: every member's /health says true (it has a leader). */
    int wait = 5;
    for (int i = 0; i < c->n;) {
        int st;
        if (waitpid(c->pid[i], &st, WNOHANG) == c->pid[i]) {
            c->pid[i] = 0;
            char path[300], buf[4096];
            snprintf(path, sizeof path, "%s/m%d.log", c->dir, i);
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            buf[n] = 0;
            if (f)
                fclose(f);
            kill_members(c);
            if (strstr(buf, "address already in use"))
                return 0;
            fprintf(stderr, "etcd m%d exited at start\n", i);
            log_tail(c, i);
            return -1;
        }
        char out[256];
        if (eh_post(c, i, "/health", NULL, NULL, out, sizeof out) == 200 &&
            strstr(out, "\"health\":\"true\"")) {
            i++;
            continue;
        }
        if (now_ms() > deadline) {
            fprintf(stderr, "etcd cluster not healthy within the deadline (member m%d)\n", i);
            for (int j = 0; j < c->n; j++)
                log_tail(c, j);
            kill_members(c);
            return -1;
        }
        nap_ms(wait);
        if (wait < 50)
            wait *= 2;
    }
    return 1;
}

int eh_start(eh_cluster *c, int n, int deadline_ms) { return eh_start_opts(c, n, deadline_ms, 0); }

int eh_start_opts(eh_cluster *c, int n, int deadline_ms, int on_disk)
{
    memset(c, 0, sizeof *c);
    c->guard_fd = -1;
    if (n < 1 || n > EH_MAX)
        return -1;
    c->n = n;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* tmpfs: etcd fsyncs every write; on disk that is ~1k puts/s. A dot
     * name keeps it out of the /dev/shm leak counters. */
    snprintf(c->dir, sizeof c->dir, "/dev/shm/.cohort-etcd-XXXXXX");
    if (on_disk || !mkdtemp(c->dir)) {
        const char *t = getenv("TMPDIR");
        snprintf(c->dir, sizeof c->dir, "%s/cohort-etcd-XXXXXX", t ? t : "/tmp");
        if (!mkdtemp(c->dir)) {
            perror("mkdtemp");
            c->dir[0] = 0;
            return -1;
        }
    }
    if (guard_start(c) < 0) {
        rm_rf(c->dir);
        return -1;
    }
    double deadline = now_ms() + deadline_ms;
    int r = 0;
    for (int attempt = 0; attempt < 5 && r == 0; attempt++)
        r = start_once(c, deadline);
    if (r != 1) {
        eh_stop(c);
        return -1;
    }
    size_t o = 0, h = 0;
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(c->endpoints + o, sizeof c->endpoints - o, "%shttp://127.0.0.1:%d",
                              i ? "," : "", c->client_port[i]);
        h += (size_t)snprintf(c->hosts + h, sizeof c->hosts - h, "%s127.0.0.1:%d", i ? "," : "",
                              c->client_port[i]);
    }
    return 0;
}

void eh_stop(eh_cluster *c)
{
    kill_members(c);
    rm_rf(c->dir);
    guard_tell(c, "D\n");
    if (c->guard_fd >= 0)
        close(c->guard_fd);
    c->guard_fd = -1;
    if (c->guard > 0)
        waitpid(c->guard, NULL, 0);
    c->guard = 0;
    c->dir[0] = 0;
}

void eh_signal(eh_cluster *c, int i, int sig)
{
    if (i < 0 || i >= c->n || c->pid[i] <= 0)
        return;
    kill(c->pid[i], sig);
    if (sig == SIGKILL) {
        waitpid(c->pid[i], NULL, 0);
        c->pid[i] = 0;
    }
}

const char *eh_addr(const eh_cluster *c, const char *prefix, char *out, size_t outlen)
{
    snprintf(out, outlen, "etcd://%s/%s", c->hosts, prefix ? prefix : "");
    return out;
}

int eh_ctl(const eh_cluster *c, int as_root, const char *const *argv)
{
    const char *args[32];
    int n = 0;
    char ep[600];
    snprintf(ep, sizeof ep, "--endpoints=%s", c->endpoints);
    args[n++] = "etcdctl";
    args[n++] = ep;
    args[n++] = "--dial-timeout=3s";
    args[n++] = "--command-timeout=5s";
    if (as_root)
        args[n++] = "--user=root:rootpw";
    for (int i = 0; argv[i] && n < 31; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    char log[300];
    snprintf(log, sizeof log, "%s/etcdctl.log", c->dir);
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        close_from(3);
        execvp("etcdctl", (char *const *)args);
        _exit(127);
    }
    int st;
    if (waitpid(p, &st, 0) != p)
        return -1;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc != 0) {
        fprintf(stderr, "etcdctl");
        for (int i = 1; args[i]; i++)
            fprintf(stderr, " %s", args[i]);
        fprintf(stderr, " -> exit %d (see below)\n", rc);
        FILE *f = fopen(log, "r");
        char buf[2048];
        size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[k] = 0;
        if (f)
            fclose(f);
        fprintf(stderr, "%s\n", buf);
    }
    return rc;
}

int eh_enable_auth(const eh_cluster *c, const char *prefix, const char *const *jobs,
                   const char *const *tokens, int njobs)
{
    const char *a1[] = {"user", "add", "root", "--new-user-password=rootpw", "--interactive=false",
                        NULL};
    const char *a2[] = {"user", "grant-role", "root", "root", NULL};
    if (eh_ctl(c, 0, a1) || eh_ctl(c, 0, a2))
        return -1;
    for (int j = 0; j < njobs; j++) {
        char pw[300], range[300];
        snprintf(pw, sizeof pw, "--new-user-password=%s", tokens[j]);
        snprintf(range, sizeof range, "/%s/%s/", prefix, jobs[j]);
        const char *b1[] = {"role", "add", jobs[j], NULL};
        const char *b2[] = {"user", "add", jobs[j], pw, "--interactive=false", NULL};
        const char *b3[] = {"role", "grant-permission", jobs[j], "--prefix=true", "readwrite",
                            range, NULL};
        const char *b4[] = {"user", "grant-role", jobs[j], jobs[j], NULL};
        if (eh_ctl(c, 0, b1) || eh_ctl(c, 0, b2) || eh_ctl(c, 0, b3) || eh_ctl(c, 0, b4))
            return -1;
    }
    const char *a3[] = {"auth", "enable", NULL};
    return eh_ctl(c, 0, a3) ? -1 : 0;
}

/* member_id and leader (decimal strings in the gateway's JSON) of member i. */
static int member_status(const eh_cluster *c, int i, unsigned long long *id,
                         unsigned long long *leader)
{
    char out[1024];
    if (eh_post(c, i, "/v3/maintenance/status", "{}", NULL, out, sizeof out) != 200)
        return -1;
    const char *m = strstr(out, "\"member_id\":\"");
    const char *l = strstr(out, "\"leader\":\"");
    if (!m || !l)
        return -1;
    *id = strtoull(m + 13, NULL, 10);
    *leader = strtoull(l + 10, NULL, 10);
    return 0;
}

int eh_move_leader(const eh_cluster *c, int i)
{
    unsigned long long id, leader;
    if (member_status(c, i, &id, &leader) < 0)
        return -1;
    if (id == leader)
        return 0;
    char hex[32];
    snprintf(hex, sizeof hex, "%llx", id);
    const char *a[] = {"move-leader", hex, NULL};
    if (eh_ctl(c, 0, a))
        return -1;
    /* The transfer completes before etcdctl returns; confirm. */
    return member_status(c, i, &id, &leader) == 0 && id == leader ? 0 : -1;
}

int eh_restart(eh_cluster *c, int i, int deadline_ms)
{
    if (i < 0 || i >= c->n || c->pid[i] > 0)
        return -1;
    double deadline = now_ms() + deadline_ms;
    c->pid[i] = spawn_member(c, i, c->initial);
    if (c->pid[i] < 0)
        return -1;
    char msg[32];
    snprintf(msg, sizeof msg, "P %d\n", (int)c->pid[i]);
    guard_tell(c, msg);
    int wait = 5;
    for (;;) {
        char out[256];
        if (eh_post(c, i, "/health", NULL, NULL, out, sizeof out) == 200 &&
            strstr(out, "\"health\":\"true\""))
            return 0;
        if (now_ms() > deadline || waitpid(c->pid[i], NULL, WNOHANG) == c->pid[i]) {
            fprintf(stderr, "etcd m%d did not come back\n", i);
            log_tail(c, i);
            return -1;
        }
        nap_ms(wait);
        if (wait < 50)
            wait *= 2;
    }
}

double eh_metric(const eh_cluster *c, int i, const char *a, const char *b, const char *d)
{
    size_t cap = 4 << 20;
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    if (eh_post(c, i, "/metrics", NULL, NULL, buf, cap) != 200) {
        free(buf);
        return -1;
    }
    double sum = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || (a && !strstr(line, a)) || (b && !strstr(line, b)) ||
            (d && !strstr(line, d)))
            continue;
        const char *sp = strrchr(line, ' ');
        if (sp)
            sum += strtod(sp + 1, NULL);
    }
    free(buf);
    return sum;
}
