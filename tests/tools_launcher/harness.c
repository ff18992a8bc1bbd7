/* harness.c - see harness.h. */
#include "harness.h"
#include "support/support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double crun_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The child's environment: this process's with env's NAME=VALUE set and
 * NAME= removed, built before fork - the child only calls async-signal-safe
 * functions (dup2, execve): a test that runs a store server thread (e.g.
 * test_multinode) must not have a child allocate after fork (an allocator
 * lock held by that thread at fork time would never be released). */
static char **child_env(const char *const *env)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (env && env[m])
        m++;
    char **out = calloc(n + m + 1, sizeof *out);
    if (!out) {
        perror("calloc");
        exit(1);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int overridden = 0;
        for (size_t j = 0; j < m && !overridden; j++) {
            const char *e = strchr(env[j], '=');
            overridden = e && (size_t)(e - env[j]) == nl && strncmp(env[j], environ[i], nl) == 0;
        }
        if (!overridden)
            out[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++) {
        const char *e = strchr(env[j], '=');
        if (e && e[1])
            out[k++] = (char *)env[j];
    }
    out[k] = NULL;
    return out;
}

void crun_start(crun_proc *p, char *const argv[], const char *const *env)
{
    memset(p, 0, sizeof *p);
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        perror("pipe2");
        exit(1);
    }
    char **envp = child_env(env);
    fflush(NULL);
    p->t_start = crun_now_ms();
    p->pid = fork();
    if (p->pid < 0) {
        perror("fork");
        exit(1);
    }
    if (p->pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        execve(argv[0], argv, envp);
        static const char msg[] = "crun_start: exec failed\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    free(envp);
    close(po[1]);
    close(pe[1]);
    p->out = po[0];
    p->err = pe[0];
    p->ocap = p->ecap = 4096;
    p->obuf = calloc(1, p->ocap);
    p->ebuf = calloc(1, p->ecap);
}

static void append(char **buf, size_t *len, size_t *cap, const char *d, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap)
            *cap *= 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, d, n);
    *len += n;
    (*buf)[*len] = 0;
}

/* One poll round: read what is there. */
static void pump(crun_proc *p, int timeout_ms)
{
    struct pollfd fds[2];
    int n = 0;
    if (p->out >= 0)
        fds[n++] = (struct pollfd){.fd = p->out, .events = POLLIN};
    if (p->err >= 0)
        fds[n++] = (struct pollfd){.fd = p->err, .events = POLLIN};
    if (n == 0)
        return;
    if (poll(fds, (nfds_t)n, timeout_ms) <= 0)
        return;
    for (int i = 0; i < n; i++) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        char b[65536];
        ssize_t r = read(fds[i].fd, b, sizeof b);
        int is_out = fds[i].fd == p->out;
        if (r <= 0) {
            close(fds[i].fd);
            if (is_out)
                p->out = -1;
            else
                p->err = -1;
            continue;
        }
        if (is_out)
            append(&p->obuf, &p->olen, &p->ocap, b, (size_t)r);
        else
            append(&p->ebuf, &p->elen, &p->ecap, b, (size_t)r);
    }
}

int crun_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t nl = strlen(needle);
    for (const char *q = hay; (q = strstr(q, needle)); q += nl)
        n++;
    return n;
}

int crun_wait_text(crun_proc *p, const char *needle, int count, int from_err, int timeout_ms)
{
    double end = crun_now_ms() + timeout_ms;
    for (;;) {
        if (crun_count(from_err ? p->ebuf : p->obuf, needle) >= count)
            return 1;
        double left = end - crun_now_ms();
        if (left <= 0 || (p->out < 0 && p->err < 0))
            return 0;
        pump(p, (int)left + 1);
    }
}

static void set_status(crun_proc *p, int st)
{
    p->reaped = 1;
    p->t_end = crun_now_ms();
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int crun_finish(crun_proc *p, int timeout_ms)
{
    double end = crun_now_ms() + timeout_ms;
    while (p->out >= 0 || p->err >= 0) {
        double left = end - crun_now_ms();
        if (left <= 0)
            break;
        pump(p, (int)left + 1);
    }
    while (!p->reaped) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            set_status(p, st);
            break;
        }
        if (crun_now_ms() >= end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            set_status(p, st);
            fprintf(stderr, "harness: pid %d missed its %d ms deadline; killed\n", (int)p->pid,
                    timeout_ms);
            return -1;
        }
        /* Reaping cadence only (the pipes are closed already). */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (p->out >= 0 || p->err >= 0)
        return -1;
    return p->status;
}

void crun_free(crun_proc *p)
{
    if (p->out >= 0)
        close(p->out);
    if (p->err >= 0)
        close(p->err);
    if (!p->reaped && p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    free(p->obuf);
    free(p->ebuf);
    memset(p, 0, sizeof *p);
}

const char *crun_helper(const char *name)
{
    static char path[1024];
    const char *b = getenv("COHORT_BUILD_DIR");
    snprintf(path, sizeof path, "%s/tests/tools_launcher/%s", b ? b : ".", name);
    return path;
}

char *crun_probe_path(void)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s", crun_helper("crun_probe"));
    return p;
}

char *crun_launcher_path(void)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s", cht_tool("cohortrun"));
    return p;
}

static int pid_alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* "pid (comm) S ...": comm may hold spaces and parens; state follows
     * the last ')'. A zombie is dead: only its parent's reaping is left. */
    char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int crun_pid_gone(pid_t pid, int timeout_ms)
{
    double end = crun_now_ms() + timeout_ms;
    while (pid_alive(pid)) {
        if (crun_now_ms() >= end)
            return 0;
        struct timespec ts = {0, 5000000}; /* polling a condition, with a deadline */
        nanosleep(&ts, NULL);
    }
    return 1;
}

void crun_tmpdir(char *out, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, len, "%s/crun-test-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        exit(1);
    }
}

void crun_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            crun_rmtree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}
