/* workers.c - one generation of this node's workers, from fork to the last
 * reaped child.
 *
 * Everything happens on the main thread in one epoll loop over: a signalfd
 * (SIGCHLD and the signals the launcher forwards), the workers' stdout and
 * stderr pipes, and, with several nodes, the store watcher's eventfd. The
 * loop never sleeps on a timer except the SIGTERM -> SIGKILL grace period and
 * the bounded drain of pipes after the last worker is reaped.
 *
 * Each worker is the leader of its own process group, so a signal sent to
 * -pid reaches whatever the worker started, and nothing a terminal sends to
 * the launcher's group reaches workers directly: the launcher forwards it.
 */
#include "cohortrun.h"
#include "bind.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

#define DRAIN_MS 1000 /* after the last worker exits, wait this long for EOF */
#define N_OWN 19      /* variables set per worker (set_names) */

enum { TAG_SIG = 1, TAG_COORD = 2, TAG_STREAM = 3 };
#define TAG(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

typedef struct worker {
    int local_rank, rank;
    int cpu;       /* pinned to this cpu after fork (--bind-to), -1: not pinned */
    pid_t pid;     /* > 0 until reaped */
    crun_stream out, err;
    char **envp;   /* this worker's environment (strings owned below) */
    char *own[N_OWN]; /* the variables set for this worker */
} worker;

/* Variables cohortrun sets: inherited values of these are dropped. */
static const char *const set_names[] = {
    "RANK",          "WORLD_SIZE",        "LOCAL_RANK",          "LOCAL_WORLD_SIZE",
    "GROUP_RANK",    "MASTER_ADDR",       "MASTER_PORT",         "COHORT_STORE",
    "COHORT_JOB_ID", "COHORT_TOKEN",      "COHORT_GENERATION",   "COHORT_RESTART_COUNT",
    "COHORT_NNODES", "COHORT_NODE_RANK",  "COHORT_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", NULL,
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *crun_signame(int sig, char *buf, size_t len)
{
    const char *abbr = sigabbrev_np(sig);
    if (abbr)
        snprintf(buf, len, "SIG%s", abbr);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

static int overridden(const char *kv)
{
    for (int i = 0; set_names[i]; i++) {
        size_t l = strlen(set_names[i]);
        if (!strncmp(kv, set_names[i], l) && kv[l] == '=')
            return 1;
    }
    return 0;
}

/* Builds w->envp: the launcher's environment without the variables we set,
 * then ours. Done in the parent: the child may only call async-signal-safe
 * functions (the store server thread exists). */
static int build_env(const crun_job *job, worker *w, uint32_t gen)
{
    const crun_cfg *cfg = job->cfg;
    size_t n = 0;
    while (environ[n])
        n++;
    w->envp = calloc(n + N_OWN + 1, sizeof *w->envp);
    if (!w->envp)
        return -1;
    size_t k = 0;
    const char *preload = NULL; /* --heap: the inherited LD_PRELOAD goes after ours */
    for (size_t i = 0; i < n; i++)
        if (cfg->heap_path && !strncmp(environ[i], "LD_PRELOAD=", 11))
            preload = environ[i] + 11;
        else if (!overridden(environ[i]))
            w->envp[k++] = environ[i];
    int world = cfg->nnodes * cfg->nproc;
    int j = 0;
#define SETV(...)                                                                                  \
    do {                                                                                           \
        if (asprintf(&w->own[j], __VA_ARGS__) < 0) {                                               \
            w->own[j] = NULL;                                                                      \
            return -1;                                                                             \
        }                                                                                          \
        w->envp[k++] = w->own[j++];                                                                \
    } while (0)
    SETV("RANK=%d", w->rank);
    SETV("WORLD_SIZE=%d", world);
    SETV("LOCAL_RANK=%d", w->local_rank);
    SETV("LOCAL_WORLD_SIZE=%d", cfg->nproc);
    SETV("GROUP_RANK=%d", cfg->node_rank);
    /* Where rank 0 binds and the others connect, for torch.distributed's
     * env:// and any program that hosts its own server there: a free port,
     * not the job's store (torchport.c). */
    SETV("MASTER_ADDR=%s", job->torch_addr);
    SETV("MASTER_PORT=%d", job->torch_port);
    SETV("COHORT_STORE=%s", job->store_url);
    SETV("COHORT_JOB_ID=%s", job->job_id);
    SETV("COHORT_TOKEN=%s", job->token);
    SETV("COHORT_GENERATION=%u", gen);
    SETV("COHORT_RESTART_COUNT=%u", gen - 1);
    SETV("COHORT_MAX_RESTARTS=%d", cfg->max_restarts);
    SETV("COHORT_NNODES=%d", cfg->nnodes);
    SETV("COHORT_NODE_RANK=%d", cfg->node_rank);
    /* torchrun's names for the restart count and limit, which programs read
     * to resume from a checkpoint. TORCHELASTIC_USE_AGENT_STORE is never set
     * (an inherited one is dropped): rank 0 hosts torch's store itself. */
    SETV("TORCHELASTIC_RESTART_COUNT=%u", gen - 1);
    SETV("TORCHELASTIC_MAX_RESTARTS=%d", cfg->max_restarts);
    if (cfg->heap_path)
        SETV("LD_PRELOAD=%s%s%s", cfg->heap_path, preload && *preload ? ":" : "",
             preload ? preload : "");
#undef SETV
    w->envp[k] = NULL;
    return 0;
}

static void free_env(worker *w)
{
    for (size_t i = 0; i < N_OWN; i++) {
        if (w->own[i]) {
            /* The token lives in one of these: do not leave it in freed heap. */
            explicit_bzero(w->own[i], strlen(w->own[i]));
            free(w->own[i]);
        }
        w->own[i] = NULL;
    }
    free(w->envp);
    w->envp = NULL;
}

/* The child side of fork: only async-signal-safe calls until execve. */
static void __attribute__((noreturn))
child_exec(const crun_job *job, worker *w, pid_t parent, int outw, int errw, int execw, int devnull)
{
    (void)setpgid(0, 0);
    /* Register with the guard before anything can be started in the group. */
    crun_guard_add_raw(job->guard_fd, getpid());
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* The launcher may have died before prctl: then nobody would kill us. */
    if (getppid() != parent)
        _exit(CRUN_EXIT_LAUNCHER);
    if (dup2(devnull, 0) < 0 || dup2(outw, 1) < 0 || dup2(errw, 2) < 0)
        goto fail;
    /* The signals the launcher stops its workers with start at their
     * defaults, however the launcher itself was started: a shell's
     * background job (or nohup) ignores SIGINT (and SIGHUP), and an ignored
     * disposition survives execve - the workers would ignore the launcher's
     * SIGINT, and Python would not raise KeyboardInterrupt. */
    static const int dfl[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
        signal(dfl[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Whatever else is open (the store's sockets, other workers' pipes)
     * must not leak into the program, even if opened without CLOEXEC. */
    (void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (w->cpu >= 0) {
        /* chosen before fork (bind.h); a failure leaves the worker unbound */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        (void)sched_setaffinity(0, sizeof set, &set);
    }
    execve(job->prog_path, job->cfg->argv, w->envp);
fail:;
    int e = errno;
    ssize_t wr = write(execw, &e, sizeof e);
    (void)wr;
    _exit(CRUN_EXIT_NOTFOUND);
}

typedef struct gen_state {
    crun_job *job;
    uint32_t gen;
    worker *w;
    int n;
    int ep;
    int alive;          /* not yet reaped */
    int open_streams;
    int stopping;       /* teardown started (SIGTERM sent) */
    int killed;         /* SIGKILL sent */
    uint64_t kill_at;   /* ms: when to escalate */
    int coord_done;     /* multi-node: the generation's end is agreed */
    crun_result *r;
} gen_state;

static void signal_all(gen_state *s, int sig)
{
    for (int i = 0; s->w && i < s->n; i++)
        if (s->w[i].pid > 0)
            (void)kill(-s->w[i].pid, sig);
}

/* Starts the teardown: sig to every live worker's group, SIGKILL after the
 * grace period. */
static void stop_all(gen_state *s, int sig)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    s->r->n_termed = s->alive;
    if (s->job->cfg->grace_ms == 0) {
        signal_all(s, SIGKILL);
        s->killed = 1;
        s->r->n_killed = s->alive;
        return;
    }
    signal_all(s, sig);
    s->kill_at = now_ms() + (uint64_t)s->job->cfg->grace_ms;
}

static void escalate(gen_state *s)
{
    if (s->killed)
        return;
    s->killed = 1;
    s->r->n_killed = s->alive;
    signal_all(s, SIGKILL);
}

static void describe_status(int wstatus, crun_fail *f)
{
    char sn[32];
    if (WIFEXITED(wstatus)) {
        f->signo = 0;
        f->code = WEXITSTATUS(wstatus);
        snprintf(f->desc, sizeof f->desc, "exited with code %d", f->code);
    } else {
        f->signo = WTERMSIG(wstatus);
        f->code = 128 + f->signo;
        snprintf(f->desc, sizeof f->desc, "was killed by signal %d (%s)%s", f->signo,
                 crun_signame(f->signo, sn, sizeof sn), WCOREDUMP(wstatus) ? ", core dumped" : "");
    }
}

/* The job's failure is another node's: adopt its record. */
static void adopt_remote(gen_state *s, const crun_fail *first)
{
    s->r->kind = CRUN_GEN_FAILED;
    s->r->fail = *first;
    s->r->local = 0;
    s->r->code = first->code;
}

/* Multi-node: records f as the generation's failure in the store unless
 * another node's came first. Returns 0 if ours stands (or single node), 1
 * with *first = the earlier record, -1 if the store is lost. */
static int publish(gen_state *s, const crun_fail *f, crun_fail *first)
{
    if (!s->job->coord)
        return 0;
    s->coord_done = 1; /* the record ends the generation on every node */
    if (crun_coord_fail(s->job->coord, s->gen, f, first) < 0)
        return -1;
    return first->node != f->node || first->rank != f->rank;
}

/* A failure of this node's agent itself (no worker to blame). */
static void agent_fail(crun_fail *f, int node, int code, int restartable, const char *what)
{
    memset(f, 0, sizeof *f);
    f->code = code;
    f->rank = -1;
    f->node = node;
    f->restartable = restartable;
    snprintf(f->desc, sizeof f->desc, "cohortrun on node %d %s", node, what);
}

/* A local worker failed first (as far as this node knows). */
static void record_failure(gen_state *s, const crun_fail *mine, pid_t pid)
{
    crun_result *r = s->r;
    r->kind = CRUN_GEN_FAILED;
    r->fail = *mine;
    r->local = 1;
    r->pid = pid;
    r->code = mine->code;
    crun_fail first;
    int p = publish(s, mine, &first);
    if (p < 0) {
        r->kind = CRUN_GEN_LAUNCH_ERROR;
        r->code = CRUN_EXIT_LAUNCHER;
    } else if (p > 0) {
        adopt_remote(s, &first);
    }
}

static void on_worker_exit(gen_state *s, worker *w, int wstatus)
{
    pid_t pid = w->pid;
    w->pid = 0;
    s->alive--;
    /* Nothing of the worker's group outlives it (a forgotten background
     * child would otherwise be an orphan); then the guard may forget it. */
    (void)kill(-pid, SIGKILL);
    crun_guard_del(s->job->guard_fd, pid);

    int ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (!ok && !s->stopping && s->r->kind == CRUN_GEN_OK) {
        crun_fail f;
        memset(&f, 0, sizeof f);
        describe_status(wstatus, &f);
        f.rank = w->rank;
        f.node = s->job->cfg->node_rank;
        f.restartable = 1;
        record_failure(s, &f, pid);
        stop_all(s, SIGTERM);
    }
    if (s->alive == 0 && !s->stopping && s->r->kind == CRUN_GEN_OK) {
        /* Every local worker exited 0: with several nodes, the job is done
         * only when every node says so (the watcher sees "alldone"). */
        if (s->job->coord && crun_coord_done(s->job->coord, s->gen) < 0) {
            s->r->kind = CRUN_GEN_LAUNCH_ERROR;
            s->r->code = CRUN_EXIT_LAUNCHER;
            s->coord_done = 1;
        }
    }
}

static void reap(gen_state *s)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0)
            return;
        if (p == s->job->guard_pid) {
            crun_msg("warning: the orphan guard (pid %d) exited; workers still die with "
                     "cohortrun (PDEATHSIG) but their own children might not",
                     (int)p);
            s->job->guard_pid = -1;
            continue;
        }
        for (int i = 0; i < s->n; i++)
            if (s->w[i].pid == p) {
                on_worker_exit(s, &s->w[i], st);
                break;
            }
    }
}

static void on_launcher_signal(gen_state *s, int sig)
{
    char sn[32];
    if (s->job->interrupted) {
        /* Second signal: do not wait for the grace period. */
        crun_note(s->job->cfg, "second %s: killing the workers now", crun_signame(sig, sn, sizeof sn));
        escalate(s);
        return;
    }
    s->job->interrupted = sig;
    crun_note(s->job->cfg, "got %s: forwarding it to %d worker(s), SIGKILL after %d ms",
              crun_signame(sig, sn, sizeof sn), s->alive, s->job->cfg->grace_ms);
    if (s->r->kind == CRUN_GEN_OK) {
        s->r->kind = CRUN_GEN_INTERRUPTED;
        s->r->signo = sig;
        s->r->code = 128 + sig;
        /* Every node stops, none restarts - unless a worker somewhere had
         * failed before: that stays the job's cause. */
        char what[64];
        crun_fail f, first;
        snprintf(what, sizeof what, "got %s", sn);
        agent_fail(&f, s->job->cfg->node_rank, 128 + sig, 0, what);
        if (publish(s, &f, &first) > 0)
            adopt_remote(s, &first);
    }
    if (s->stopping) {
        /* Already tearing down after a failure: forward anyway. */
        signal_all(s, sig);
        return;
    }
    stop_all(s, sig);
}

static void on_signals(gen_state *s)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t r = read(s->job->sigfd, &si, sizeof si);
        if (r != (ssize_t)sizeof si)
            break;
        if (si.ssi_signo == SIGCHLD)
            continue; /* reaped below, once per batch */
        on_launcher_signal(s, (int)si.ssi_signo);
    }
    reap(s);
}

static void on_coord(gen_state *s)
{
    crun_fail f;
    int st = crun_coord_state(s->job->coord, &f);
    if (st == CRUN_COORD_PENDING || s->coord_done)
        return;
    s->coord_done = 1;
    if (st == CRUN_COORD_ALLDONE)
        return;
    if (st == CRUN_COORD_LOST) {
        if (s->r->kind == CRUN_GEN_OK) {
            s->r->kind = CRUN_GEN_LAUNCH_ERROR;
            s->r->code = CRUN_EXIT_LAUNCHER;
        }
        stop_all(s, SIGTERM);
        return;
    }
    /* Another node recorded the generation's failure. */
    if (s->r->kind == CRUN_GEN_OK)
        adopt_remote(s, &f);
    stop_all(s, SIGTERM);
}

static void close_stream(gen_state *s, crun_stream *st)
{
    if (st->fd >= 0) {
        epoll_ctl(s->ep, EPOLL_CTL_DEL, st->fd, NULL);
        crun_stream_close(st);
        s->open_streams--;
    }
}

static int spawn(gen_state *s, worker *w, int devnull, int *exec_fd)
{
    /* stdout, stderr, and the exec status (EOF on a successful exec). */
    int pp[3][2], made;
    for (made = 0; made < 3; made++)
        if (pipe2(pp[made], O_CLOEXEC) < 0)
            break;
    if (made < 3) {
        int saved = errno;
        for (int i = 0; i < made; i++) {
            close(pp[i][0]);
            close(pp[i][1]);
        }
        errno = saved;
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(s->job, w, parent, pp[0][1], pp[1][1], pp[2][1], devnull);
    int saved = errno;
    for (int i = 0; i < 3; i++) {
        close(pp[i][1]);
        if (pid < 0)
            close(pp[i][0]);
    }
    if (pid < 0) {
        errno = saved;
        return -1;
    }
    /* Also set here, so kill(-pid) works whichever of us runs first. */
    (void)setpgid(pid, pid);
    w->pid = pid;
    s->alive++;
    w->out.fd = pp[0][0];
    w->err.fd = pp[1][0];
    *exec_fd = pp[2][0];
    crun_stream *sts[2] = {&w->out, &w->err};
    for (int k = 0; k < 2; k++) {
        fcntl(sts[k]->fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_STREAM, 2 * w->local_rank + k)};
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, sts[k]->fd, &ev) == 0)
            s->open_streams++;
        else
            crun_stream_close(sts[k]);
    }
    return 0;
}

static void launch_error(gen_state *s, int code)
{
    if (s->r->kind == CRUN_GEN_OK || s->r->kind == CRUN_GEN_INTERRUPTED) {
        s->r->kind = CRUN_GEN_LAUNCH_ERROR;
        s->r->code = code;
    }
    crun_fail f, first;
    agent_fail(&f, s->job->cfg->node_rank, code, 0, "could not start its workers");
    (void)publish(s, &f, &first);
    stop_all(s, SIGTERM);
}

void crun_run_generation(crun_job *job, uint32_t gen, crun_result *r)
{
    const crun_cfg *cfg = job->cfg;
    memset(r, 0, sizeof *r);
    gen_state S = {.job = job, .gen = gen, .n = cfg->nproc, .r = r, .ep = -1};
    gen_state *s = &S;
    int devnull = -1;
    int *exec_fds = NULL;

    s->w = calloc((size_t)s->n, sizeof *s->w);
    exec_fds = malloc((size_t)s->n * sizeof *exec_fds);
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!s->w || !exec_fds || s->ep < 0 || devnull < 0) {
        crun_msg("cannot set up generation %u: %s", gen, strerror(errno));
        launch_error(s, CRUN_EXIT_LAUNCHER); /* the other nodes must learn it too */
        goto out;
    }
    for (int i = 0; i < s->n; i++) {
        exec_fds[i] = -1;
        /* Until initialised, nothing to close (calloc's 0 would be stdin). */
        s->w[i].out.fd = s->w[i].out.log_fd = -1;
        s->w[i].err.fd = s->w[i].err.log_fd = -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_SIG, 0)};
    epoll_ctl(s->ep, EPOLL_CTL_ADD, job->sigfd, &ev);
    if (job->coord) {
        int cfd = crun_coord_watch(job->coord, gen);
        if (cfd < 0) {
            launch_error(s, CRUN_EXIT_LAUNCHER);
            goto out;
        }
        ev.data.u64 = TAG(TAG_COORD, 0);
        epoll_ctl(s->ep, EPOLL_CTL_ADD, cfd, &ev);
    }

    for (int i = 0; i < s->n; i++) {
        worker *w = &s->w[i];
        w->local_rank = i;
        w->rank = cfg->node_rank * cfg->nproc + i;
        w->cpu = cli_bind_choose(cfg->bind_to, i, cfg->nproc);
        if (crun_stream_init(&w->out, w->rank, 1, 0) < 0 ||
            crun_stream_init(&w->err, w->rank, 2, 1) < 0 || build_env(job, w, gen) < 0) {
            crun_msg("out of memory preparing rank %d", w->rank);
            launch_error(s, CRUN_EXIT_LAUNCHER);
            break;
        }
        w->out.bare = w->err.bare = cfg->no_prefix;
        if (cfg->log_dir) {
            w->out.log_fd = crun_log_open(cfg->log_dir, w->rank, 0);
            w->err.log_fd = crun_log_open(cfg->log_dir, w->rank, 1);
            if (w->out.log_fd < 0 || w->err.log_fd < 0) {
                launch_error(s, CRUN_EXIT_LAUNCHER);
                break;
            }
            if (gen > 1) {
                char mark[96];
                int ml = snprintf(mark, sizeof mark, "--- cohortrun: generation %u (restart %u) ---\n",
                                  gen, gen - 1);
                (void)crun_write_all(w->out.log_fd, mark, (size_t)ml);
                (void)crun_write_all(w->err.log_fd, mark, (size_t)ml);
            }
        }
        if (spawn(s, w, devnull, &exec_fds[i]) < 0) {
            crun_msg("cannot start rank %d: %s", w->rank, strerror(errno));
            launch_error(s, CRUN_EXIT_LAUNCHER);
            break;
        }
    }
    /* Learn whether each exec worked: the CLOEXEC pipe reads EOF on success
     * and the child's errno on failure. Children exec in parallel, so this
     * waits about as long as the slowest exec. */
    for (int i = 0; i < s->n; i++) {
        if (exec_fds[i] < 0)
            continue;
        int e = 0;
        ssize_t got;
        do
            got = read(exec_fds[i], &e, sizeof e);
        while (got < 0 && errno == EINTR);
        close(exec_fds[i]);
        exec_fds[i] = -1;
        if (got == (ssize_t)sizeof e && !s->stopping) {
            crun_msg("cannot execute '%s' (rank %d): %s", job->prog_path, s->w[i].rank,
                     strerror(e));
            launch_error(s, e == ENOENT ? CRUN_EXIT_NOTFOUND : CRUN_EXIT_NOEXEC);
        }
    }

    /* The loop: until every worker is reaped, its output drained, and (with
     * several nodes) the generation's end agreed. Nothing here polls: epoll
     * sleeps until a pipe, a signal or the watcher has something, and only
     * the grace period and the drain bound put a timeout on it. */
    uint64_t drain_until = 0;
    for (;;) {
        if (s->alive == 0) {
            if (!drain_until)
                drain_until = now_ms() + DRAIN_MS;
            int agreed = !job->coord || s->coord_done || s->stopping;
            if (agreed && (s->open_streams == 0 || now_ms() >= drain_until))
                break;
        }
        int timeout = -1;
        uint64_t t = now_ms();
        if (s->stopping && !s->killed)
            timeout = s->kill_at > t ? (int)(s->kill_at - t) : 0;
        if (s->alive == 0 && s->open_streams > 0) {
            int dt = drain_until > t ? (int)(drain_until - t) : 0;
            timeout = timeout < 0 || dt < timeout ? dt : timeout;
        }
        struct epoll_event evs[32];
        int ne = epoll_wait(s->ep, evs, 32, timeout);
        if (ne < 0 && errno != EINTR) {
            crun_msg("epoll_wait: %s", strerror(errno));
            escalate(s);
            /* Reap with blocking waits: nothing else can be trusted now. */
            while (s->alive > 0) {
                int st;
                pid_t p = waitpid(-1, &st, 0);
                if (p < 0)
                    break;
                for (int i = 0; i < s->n; i++)
                    if (s->w[i].pid == p)
                        on_worker_exit(s, &s->w[i], st);
            }
            break;
        }
        for (int i = 0; i < ne; i++) {
            uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32);
            uint32_t idx = (uint32_t)evs[i].data.u64;
            if (kind == TAG_SIG) {
                on_signals(s);
            } else if (kind == TAG_COORD) {
                on_coord(s);
            } else if (kind == TAG_STREAM && (int)(idx / 2) < s->n) {
                worker *w = &s->w[idx / 2];
                crun_stream *st = idx % 2 ? &w->err : &w->out;
                if (crun_stream_pump(st) <= 0)
                    close_stream(s, st);
            }
        }
        if (s->stopping && !s->killed && now_ms() >= s->kill_at)
            escalate(s);
    }

out:
    if (r->kind == CRUN_GEN_FAILED && r->local) {
        for (int i = 0; i < s->n; i++)
            if (s->w && s->w[i].rank == r->fail.rank)
                r->n_tail = crun_stream_tail(&s->w[i].err, r->tail, CRUN_TAIL_LINES);
    }
    if (job->coord)
        crun_coord_unwatch(job->coord);
    for (int i = 0; s->w && i < s->n; i++) {
        if (s->w[i].pid > 0) {
            /* Only reachable after an internal error: never leave one. */
            kill(-s->w[i].pid, SIGKILL);
            waitpid(s->w[i].pid, NULL, 0);
            crun_guard_del(job->guard_fd, s->w[i].pid);
        }
        crun_stream_fini(&s->w[i].out);
        crun_stream_fini(&s->w[i].err);
        free_env(&s->w[i]);
        if (exec_fds && exec_fds[i] >= 0)
            close(exec_fds[i]);
    }
    free(s->w);
    free(exec_fds);
    if (s->ep >= 0)
        close(s->ep);
    if (devnull >= 0)
        close(devnull);
}
