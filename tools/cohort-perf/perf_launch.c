/* perf_launch.c - `cohort-perf -n N`: fork N ranks on this host.
 *
 * The ranks are forked before anything starts a thread or calls
 * cohort_init (the library is not fork-safe). Only then does this process
 * start the job's store server and hand its address to every rank over a
 * pipe: no port is guessed, so nothing can race for it. The store lives in
 * the launcher rather than in rank 0, which changes nothing on the data path
 * (the store is not used while collectives run).
 *
 * Teardown: a rank that fails should make its peers fail too (that is the
 * library's promise: a dead peer becomes COHORT_ERR_PEER_LOST). The launcher
 * gives them a grace period to do so, says which ranks did not, and kills
 * those. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bind.h"
#include "perf.h"

#define PERF_GRACE_S 10.0

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int make_token(char *tok, size_t len)
{
    unsigned char rnd[16];
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f)
        return -1;
    size_t got = fread(rnd, 1, sizeof rnd, f);
    fclose(f);
    if (got != sizeof rnd || len < 2 * sizeof rnd + 1)
        return -1;
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
    return 0;
}

/* In the child: sets the rank's environment, waits for the store address,
 * runs the benchmark. Never returns. */
static void rank_child(const perf_opts *o, int r, int rfd, const char *job, const char *token,
                       int (*rank_main)(const perf_opts *), pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the launcher died before prctl took effect */
        _exit(3);
    char b[32];
    snprintf(b, sizeof b, "%d", r);
    setenv("RANK", b, 1);
    setenv("LOCAL_RANK", b, 1);
    snprintf(b, sizeof b, "%d", o->nranks);
    setenv("WORLD_SIZE", b, 1);
    setenv("LOCAL_WORLD_SIZE", b, 1);
    setenv("COHORT_JOB_ID", job, 1);
    setenv("COHORT_TOKEN", token, 1);
    /* Open MPI's default (tools/common/bind.h): one rank per core while
     * they fit, none when oversubscribed. */
    int cpu = cli_bind_choose(o->bind, r, o->nranks);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            fprintf(stderr, "cohort-perf: rank %d: sched_setaffinity(cpu %d): %s (running unbound)\n",
                    r, cpu, strerror(errno));
    }
    /* One line: the store URL. EOF means the launcher could not start it. */
    char url[256];
    size_t got = 0;
    while (got < sizeof url - 1) {
        ssize_t k = read(rfd, url + got, 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            _exit(3);
        if (url[got] == '\n')
            break;
        got++;
    }
    url[got] = 0;
    close(rfd);
    setenv("COHORT_STORE", url, 1);
    int rc = rank_main(o);
    fflush(NULL);
    _exit(rc);
}

static const char *describe(int st, char *buf, size_t len)
{
    if (WIFEXITED(st))
        snprintf(buf, len, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, len, "status 0x%x", st);
    return buf;
}

int perf_launch(const perf_opts *o, int (*rank_main)(const perf_opts *))
{
    int n = o->nranks;
    char job[64], token[40];
    snprintf(job, sizeof job, "perf-%d-%ld", (int)getpid(), (long)time(NULL));
    if (make_token(token, sizeof token) != 0) {
        fprintf(stderr, "cohort-perf: cannot read /dev/urandom for the job token\n");
        return 2;
    }
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int *wfd = calloc((size_t)n, sizeof *wfd);
    int *done = calloc((size_t)n, sizeof *done);
    int *status = calloc((size_t)n, sizeof *status);
    if (!pids || !wfd || !done || !status) {
        fprintf(stderr, "cohort-perf: out of memory for %d ranks\n", n);
        return 2;
    }
    /* SIGCHLD/SIGINT/SIGTERM are taken synchronously (sigtimedwait) by the
     * launcher; children restore the default mask before running. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old);
    fflush(NULL);
    pid_t self = getpid();
    int started = 0;
    for (int r = 0; r < n; r++) {
        int p[2];
        if (pipe(p) != 0) {
            fprintf(stderr, "cohort-perf: pipe: %s\n", strerror(errno));
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "cohort-perf: fork rank %d: %s\n", r, strerror(errno));
            close(p[0]);
            close(p[1]);
            break;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            close(p[1]);
            for (int q = 0; q < r; q++)
                close(wfd[q]);
            rank_child(o, r, p[0], job, token, rank_main, self);
        }
        close(p[0]);
        pids[r] = pid;
        wfd[r] = p[1];
        started++;
    }

    int rc = 0;
    cohort_store_server *srv = NULL;
    if (started == n) {
        cohort_store_server_opts so;
        memset(&so, 0, sizeof so);
        const char *jp = job, *tp = token;
        so.bind_addr = "127.0.0.1";
        so.job_ids = &jp;
        so.tokens = &tp;
        so.n_jobs = 1;
        cohort_status st = cohort_store_server_start(&srv, &so);
        if (st != COHORT_OK) {
            fprintf(stderr, "cohort-perf: cannot start the store: %s: %s\n",
                    cohort_status_name(st), cohort_last_error(NULL));
            srv = NULL;
            rc = 2;
        }
    } else {
        rc = 2;
    }
    char url[128];
    if (srv)
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d\n", cohort_store_server_port(srv));
    for (int r = 0; r < started; r++) {
        /* On failure the pipe closes without a line: the rank exits 3. */
        if (srv && write(wfd[r], url, strlen(url)) != (ssize_t)strlen(url))
            fprintf(stderr, "cohort-perf: cannot hand the store address to rank %d\n", r);
        close(wfd[r]);
    }
    memset(token, 0, sizeof token);

    double t0 = mono_s();
    double first_fail = 0, deadline = o->deadline_s > 0 ? t0 + o->deadline_s : 0;
    int left = started, killed = 0;
    while (left > 0) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            for (int r = 0; r < started; r++) {
                if (pids[r] != p || done[r])
                    continue;
                done[r] = 1;
                status[r] = st;
                left--;
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                    char d[96];
                    if (!killed)
                        fprintf(stderr, "cohort-perf: rank %d %s\n", r, describe(st, d, sizeof d));
                    if (!first_fail)
                        first_fail = mono_s();
                }
            }
        }
        if (left == 0)
            break;
        double now = mono_s();
        const char *why = NULL;
        if (first_fail && now - first_fail > PERF_GRACE_S)
            why = "still running 10 s after another rank failed (peer loss not detected?)";
        else if (deadline && now > deadline)
            why = "still running at the --deadline";
        if (why && !killed) {
            for (int r = 0; r < started; r++)
                if (!done[r]) {
                    fprintf(stderr, "cohort-perf: rank %d %s: killing it\n", r, why);
                    kill(pids[r], SIGKILL);
                }
            killed = 1;
            rc = rc > 3 ? rc : 3;
        }
        /* Sleep until a child exits, a signal comes, or the next check. */
        double wait_s = 0.5;
        struct timespec ts = {(time_t)wait_s, (long)((wait_s - (time_t)wait_s) * 1e9)};
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &ts);
        if ((sig == SIGINT || sig == SIGTERM) && !killed) {
            fprintf(stderr, "cohort-perf: %s: stopping the ranks\n", strsignal(sig));
            for (int r = 0; r < started; r++)
                if (!done[r])
                    kill(pids[r], SIGKILL);
            killed = 1;
            rc = rc > 3 ? rc : 3;
        }
    }
    if (srv)
        cohort_store_server_stop(srv);
    for (int r = 0; r < started; r++) {
        int st = status[r];
        int c = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
        if (c > rc)
            rc = c;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(pids);
    free(wfd);
    free(done);
    free(status);
    return rc;
}
