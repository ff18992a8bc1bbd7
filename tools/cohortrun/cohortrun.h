/*
 * cohortrun.h - the launcher's internal pieces (one process, one thread for
 * everything except the embedded store server and, with several nodes, one
 * store watcher thread).
 *
 *   main.c     top level: options, the job's identity, the store, the
 *              generation loop (restarts) and the exit code
 *   opts.c     command line parsing and validation
 *   workers.c  one generation: fork/exec the local workers, pump their
 *              output, reap them, tear the set down on the first failure or
 *              on a signal to the launcher
 *   output.c   line splitting, "[rank] " prefixes, per-rank log files, the
 *              stderr tail kept for the failure summary
 *   guard.c    the orphan guard: a small process that SIGKILLs every worker
 *              process group if the launcher dies without cleaning up
 *   torchport.c  MASTER_ADDR/MASTER_PORT: a free port for torch's rank 0
 *   coord.c    node agents agreeing through the job's store on generations,
 *              failures and completion (only with --nnodes > 1)
 *
 * Exit codes of cohortrun (docs/launcher.md): 0 success; the first failing
 * worker's code (128+signal if it was killed); 128+signal when cohortrun itself
 * was interrupted; 2 bad usage; 125 launcher failure (store, spawn, lost
 * peer agent); 126 program not executable; 127 program not found.
 */
#ifndef COHORTRUN_H
#define COHORTRUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CRUN_EXIT_USAGE 2
#define CRUN_EXIT_LAUNCHER 125
#define CRUN_EXIT_NOEXEC 126
#define CRUN_EXIT_NOTFOUND 127

#define CRUN_TAIL_LINES 10  /* stderr lines quoted in the failure summary */
#define CRUN_TAIL_LINE_MAX 512

/* ---- configuration (opts.c) ---- */
typedef struct crun_cfg {
    int nproc;              /* workers on this node */
    int nnodes, node_rank;
    char master_host[256];  /* from --master (empty: none given) */
    int master_port;
    const char *store_url;  /* --store: an external store; NULL: we host it */
    const char *job_id;     /* --job-id (NULL: COHORT_JOB_ID, then random) */
    const char *token_file; /* --token-file */
    int max_restarts;
    int grace_ms;
    const char *log_dir;
    const char *bind_addr;  /* where the hosted store listens */
    int bind_to;            /* --bind-to / COHORT_BIND: CLI_BIND_* (tools/common/bind.h) */
    int join_timeout_ms;    /* multi-node: how long agents wait for each other */
    int quiet;              /* no launcher notices, only the failure summary */
    int no_prefix;          /* --no-prefix: worker lines without "[rank] " */
    int no_python;          /* --no-python: never put python3 in front */
    char *heap_path;        /* --heap: libcohort-heap.so, preloaded into the workers */
    char **py_argv;         /* "python3 [-m] PROGRAM ARGS" when that was put in front */
    char **argv;            /* the program and its arguments (NULL-terminated) */
    int argc;
} crun_cfg;

/* Parses argv into cfg. Returns 0, or CRUN_EXIT_USAGE after printing why
 * (or -1 after printing help/version: exit 0). */
int crun_parse(crun_cfg *cfg, int argc, char **argv);

/* ---- launcher messages (main.c): "cohortrun: ..." on stderr, one write
 * per message so they never split a worker's line. */
void crun_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void crun_note(const crun_cfg *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes all of buf to fd (retrying short writes and EINTR). -1 on error. */
int crun_write_all(int fd, const void *buf, size_t len);

/* ---- output (output.c) ---- */
typedef struct crun_stream {
    int fd;          /* read end of the worker's pipe, -1 once closed */
    int out_fd;      /* 1 or 2 */
    int log_fd;      /* rank-<r>.out/.err or -1 */
    int rank;
    int bare;        /* --no-prefix: lines as the worker wrote them */
    char *buf;       /* pending partial line */
    size_t len, cap;
    /* last lines, kept only for stderr (the failure summary) */
    char (*tail)[CRUN_TAIL_LINE_MAX];
    int tail_n, tail_next, tail_cap;
} crun_stream;

int crun_stream_init(crun_stream *s, int rank, int out_fd, int keep_tail);
void crun_stream_fini(crun_stream *s);
/* Reads what is available and emits complete lines; returns 1 while open,
 * 0 at EOF, -1 on a read error (then call crun_stream_close). */
int crun_stream_pump(crun_stream *s);
/* Flushes a partial line and closes the pipe. */
void crun_stream_close(crun_stream *s);
/* Copies the tail (oldest first) into lines; returns how many. */
int crun_stream_tail(const crun_stream *s, char (*lines)[CRUN_TAIL_LINE_MAX], int max);
/* Opens <dir>/rank-<r>.out or .err for appending (creating dir). -1 on
 * failure after printing why. */
int crun_log_open(const char *dir, int rank, int is_err);

/* ---- orphan guard (guard.c) ---- */
/* Forks the guard; returns the write end of its pipe (CLOEXEC), -1 on
 * failure. Call while the launcher is still single-threaded. */
int crun_guard_start(pid_t *guard_pid);
/* Registers / forgets a worker's process group. The child registers itself
 * (before exec) with crun_guard_add_raw; both are async-signal-safe. */
void crun_guard_add_raw(int guard_fd, pid_t pgid);
void crun_guard_del(int guard_fd, pid_t pgid);

/* ---- multi-node coordination (coord.c) ---- */
typedef struct crun_coord crun_coord;

/* A failure as agreed on by every node of the job (text-encoded in the
 * store as "cohortrun/g<G>/fail"). */
typedef struct crun_fail {
    int code;        /* the exit code cohortrun will return */
    int signo;       /* the worker's fatal signal, 0 if it exited */
    int rank;        /* global rank, -1 if no worker (an agent was interrupted) */
    int node;        /* node rank that reported it */
    int restartable; /* 0: interrupted launcher or launch error: never restart */
    char desc[256];  /* "exited with code 3", "killed by signal 9 (SIGKILL)" */
} crun_fail;

int crun_coord_open(crun_coord **out, const crun_cfg *cfg, const char *store_addr,
                    const char *job_id, const char *token);
void crun_coord_close(crun_coord *c);
/* Waits (bounded by cfg->join_timeout_ms; returns early with the signal
 * number if one arrives on sigfd) until every node joined generation gen.
 * Returns 0, a positive signal number, or -1 after printing why. */
int crun_coord_join(crun_coord *c, uint32_t gen, int sigfd);
/* Starts the watcher of generation gen: the returned fd (eventfd) becomes
 * readable when a failure is recorded, all nodes are done, or the store is
 * lost. */
int crun_coord_watch(crun_coord *c, uint32_t gen);
enum { CRUN_COORD_PENDING = 0, CRUN_COORD_FAILED, CRUN_COORD_ALLDONE, CRUN_COORD_LOST };
/* What the watcher saw (CRUN_COORD_*); with FAILED, *f is the record. */
int crun_coord_state(crun_coord *c, crun_fail *f);
void crun_coord_unwatch(crun_coord *c);
/* Records f as generation gen's failure unless another node was first;
 * *first receives the winning record. Returns 0, or -1 (store lost). */
int crun_coord_fail(crun_coord *c, uint32_t gen, const crun_fail *f, crun_fail *first);
/* This node's workers all exited 0 in generation gen. */
int crun_coord_done(crun_coord *c, uint32_t gen);
/* The job is over: every agent acknowledges; the store's host waits
 * (bounded) for the acknowledgements before it stops serving. */
void crun_coord_leave(crun_coord *c, uint32_t gen);
/* Node 0 publishes generation gen's MASTER_ADDR/MASTER_PORT before it joins;
 * the others read it after the join. 0, or -1 (said why). */
int crun_coord_put_torch(crun_coord *c, uint32_t gen, const char *addr, int port);
int crun_coord_get_torch(crun_coord *c, uint32_t gen, char *addr, size_t len, int *port);

/* ---- MASTER_ADDR/MASTER_PORT for the workers (torchport.c) ---- */
/* A port that nothing on this host holds, outside the ephemeral range, for
 * rank 0 of generation gen to bind; -1 (errno) if none was found. */
int crun_torch_port(const char *job_id, uint32_t gen);
/* The address this host sends from toward host:port (no packet is sent). */
int crun_local_addr_toward(const char *host, int port, char *out, size_t len);

/* ---- one generation (workers.c) ---- */
enum {
    CRUN_GEN_OK = 0,       /* every worker (every node) exited 0 */
    CRUN_GEN_FAILED,       /* a worker failed (here or on another node): see fail */
    CRUN_GEN_INTERRUPTED,  /* the launcher got SIGINT/SIGTERM/SIGHUP: see signo */
    CRUN_GEN_LAUNCH_ERROR, /* spawn failed, exec failed, store lost: see code */
};

typedef struct crun_result {
    int kind;
    int signo;        /* INTERRUPTED: the launcher's signal */
    int code;         /* the exit code to return for this outcome */
    crun_fail fail;   /* FAILED */
    int local;        /* FAILED: the failing worker is on this node */
    pid_t pid;        /* its pid */
    int n_tail;
    char tail[CRUN_TAIL_LINES][CRUN_TAIL_LINE_MAX];
    int n_termed, n_killed; /* workers stopped by SIGTERM / needing SIGKILL */
} crun_result;

typedef struct crun_job {
    const crun_cfg *cfg;
    const char *prog_path;   /* resolved executable */
    const char *job_id;
    const char *token;
    char store_url[300];     /* COHORT_STORE given to workers */
    char master_addr[256];
    int master_port;
    int fixed_torch_port;    /* > 0: --master-port on one node, MASTER_PORT of every generation */
    char torch_addr[256];    /* this generation's MASTER_ADDR/MASTER_PORT */
    int torch_port;
    int sigfd;               /* signalfd: SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT */
    int guard_fd;
    pid_t guard_pid;
    crun_coord *coord;       /* NULL on a single node */
    int interrupted;         /* a signal arrived between generations */
} crun_job;

/* Runs generation gen (restart = gen - 1) of this node's workers to the end.
 * Returns the outcome in *r (never leaves a worker behind). */
void crun_run_generation(crun_job *job, uint32_t gen, crun_result *r);

/* "SIGKILL" (or "signal 42") */
const char *crun_signame(int sig, char *buf, size_t len);

#endif
