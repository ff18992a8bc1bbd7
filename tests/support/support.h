/*
 * support.h - test helpers on top of Check: status asserts, a rank spawner
 * that forks real processes, store helpers. Rank processes never call
 * ck_assert: they report through their exit status and stderr, and the test
 * process asserts, so a failure is charged to the right test.
 */
#ifndef COHORT_TEST_SUPPORT_H
#define COHORT_TEST_SUPPORT_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cohort.h"

/* Runs a Check suite (CK_VERBOSITY picks the output; normal by default) and
 * makes its failure count the process's exit status. */
int cht_run_suite(Suite *s);

/* The main() of every Check test file: suite_fn() builds the suite. */
#define COH_TEST_MAIN(suite_fn)                                                                    \
    int main(void) { return cht_run_suite(suite_fn()); }

/* Per-transport cases: one case function, stamped once per entry of one
 * list ("auto": the segment between ranks of one host; "tcp": sockets
 * only). Inside the case, cht_transports[_i] is its COHORT_TRANSPORT. */
#define CHT_N_TRANSPORTS 2
extern const char *const cht_transports[CHT_N_TRANSPORTS];
#define cht_add_per_transport(tc, fn) tcase_add_loop_test(tc, fn, 0, CHT_N_TRANSPORTS)

/* Assert a status in the test process, printing name, text and detail. */
#define CHT_PASS(expr) CHT_EXPECT(expr, COHORT_OK, NULL)
#define CHT_EXPECT(expr, want, g)                                                                  \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        ck_assert_msg(st_ == (want), "%s returned %s (%s), wanted %s; detail: %s", #expr,          \
                      cohort_status_name(st_), cohort_strerror(st_), cohort_status_name(want),     \
                      cohort_last_error(g));                                                       \
    } while (0)

/* In a rank process: on failure print and exit(1). */
#define RANK_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define RANK_PASS(expr, g)                                                                         \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        RANK_CHECK(st_ == COHORT_OK, "%s: %s", cohort_status_name(st_), cohort_last_error(g));     \
    } while (0)

/* How ranks find the store. */
enum cht_store_mode {
    CHT_STORE_RANK0 = 0,   /* rank 0 hosts the embedded store (MASTER_ADDR/PORT) */
    CHT_STORE_PARENT = 1,  /* the test process runs a server; COHORT_STORE=tcp://... */
};

typedef struct cht_opts {
    int nranks;
    int deadline_ms;        /* kill everything after this; 0: 60 s */
    int store_mode;
    const char *transport;  /* COHORT_TRANSPORT value or NULL */
    const char *extra_env;  /* "K=V;K2=V2" set in every rank, or NULL */
    int generation;         /* 0: unset */
    /* Per-rank network namespace (names made by cht_netns_create), or NULL:
     * each rank joins its namespace (setns) right after fork. */
    const char *const *netns;
    const char *master_addr; /* MASTER_ADDR / store host when not 127.0.0.1 */
    /* Ranks that stopped themselves (SIGSTOP) are resumed (SIGCONT) once
     * every other rank has exited: "frozen, then resumed after the timeout". */
    int resume_stopped;
} cht_opts;

/* Result of one run: exit status per rank (exit code, or 128+signal), and
 * ranks that had to be killed at the deadline. */
typedef struct cht_result {
    int n;
    int status[64];         /* exit code, 128+sig if signalled */
    int hung[64];           /* 1 if killed at the deadline */
    double elapsed_ms;
    char store_addr[128];   /* parent-hosted store address, if any */
    int parent;             /* what cht_spawn's parent callback returned */
} cht_result;

/* The one fork-based spawner under every multi-process test. Forks n
 * (1..64) children; child r runs child(r, arg) and exits with its return
 * value, and dies with the test process (PR_SET_PDEATHSIG). The test
 * process then runs parent(arg), if given, and reaps with a bounded wait: a
 * child still running deadline_ms (0: 60 s) after that is SIGKILLed and
 * marked hung. resume_stopped: children that stopped themselves (SIGSTOP)
 * are resumed (SIGCONT) once every other child has exited. Returns 0 if
 * every child exited 0, 1 if one did not or hung, -1 if fork failed (the
 * children already forked are killed and reaped). */
int cht_spawn(int n, int deadline_ms, int resume_stopped, int (*child)(int rank, void *arg),
              int (*parent)(void *arg), void *arg, cht_result *res);

/* Forks opts->nranks processes with RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, COHORT_JOB_ID, COHORT_TOKEN set,
 * runs fn(rank, arg) in each and exits with its return value (cht_spawn).
 * Returns 0 if every rank exited 0. */
int cht_run_ranks(const cht_opts *opts, int (*fn)(int rank, void *arg), void *arg,
                  cht_result *res);

/* Convenience: every rank exited 0, no hang; prints a summary otherwise. */
void cht_assert_all_ok(const cht_result *r);

/* A free TCP port on 127.0.0.1 (bind 0, read it, close). Only for
 * processes that must be told a port before they start (MASTER_PORT). */
/* A latency bound's scale in slow builds: CK_TIMEOUT_MULTIPLIER (what
 * scripts/test.sh sets for the sanitizer runs: 3 ASan, 4 TSan; Check
 * scales its own timeouts by it), at least 1. A test bounds a product's
 * promise P by P x this, never more. */
double cht_time_scale(void);
int cht_free_port(void);
/* Pins the calling process to the first cpu it may use, so that the ranks
 * of a run outnumber the cpus on any machine (call before the group is
 * made: the rendezvous reads the cpu set). 0, or -1 with errno. */
int cht_pin_one_cpu(void);

/* Starts an embedded store server in the test process on 127.0.0.1:0 for
 * one job; writes "127.0.0.1:<port>". */
cohort_store_server *cht_store_start(const char *job, const char *token, char *addr,
                                     size_t addrlen);

/* A small cluster on one machine: `hosts` network namespaces named
 * cht_netns_name(base, i) = "<base><pid>n<i>", each with lo up and a veth
 * into a hub namespace "<base><pid>h" holding a bridge; host i has IP
 * 10.<net>.0.<i+1>/24. <pid> is the creating process's: two runs at once
 * (two build trees, CI and a developer) never share a name, and their IPs
 * live in their own namespaces. Removes first the clusters of `base` whose
 * pid no longer exists (an interrupted run's; cht_netns_stale) and this
 * pid's own. Returns 0 on success (needs root and iproute2).
 * cht_netns_destroy removes everything; it is also registered with atexit
 * so a failing test does not leave namespaces. Every call takes the base;
 * in a process forked after cht_netns_create it names the creator's
 * cluster. */
int cht_netns_create(const char *base, int hosts, int net);
void cht_netns_destroy(const char *base, int hosts);
/* The namespace of host i (-1: the hub); a static buffer (4 in rotation). */
const char *cht_netns_name(const char *base, int host);
/* Counts (and with remove, deletes) the namespaces of `base` whose pid is
 * gone. */
int cht_netns_stale(const char *base, int remove);
/* Takes host i's link down (1) or up (0). */
int cht_netns_link(const char *base, int host, int down);
/* "10.<net>.0.<host+1>" */
const char *cht_netns_ip(int net, int host);

/* Sets "K=V;K2=V2" in this process's environment (NULL: nothing). */
void cht_set_env(const char *list);

/* Unsets every variable a launcher or user sets for init (RANK, WORLD_SIZE,
 * LOCAL_*, MASTER_*, COHORT_*, SLURM_*, OMPI_*, PMI_*, PMIX_*, MPI_LOCAL*)
 * so a test sees only what it sets; COHORT_BUILD_DIR and COHORT_SOURCE_DIR
 * (where the test finds tools and sources) stay. */
void cht_clear_launch_env(void);

/* For the programs a real launcher starts (mpirun, mpiexec, srun):
 * cohort_init, or NULL after printing the status and error to stderr. */
cohort_group *cht_launched_init(void);
/* Their "ok" run: all_reduce of rank + i over 256 int64, every sum checked
 * exactly, then barrier and finalize (g is gone after a successful one).
 * Returns 1 only if every step succeeded and every sum was exact. */
int cht_launched_sum_run(cohort_group *g);

/* Pattern helpers: deterministic input values. cht_mix: a 64-bit mixer
 * (the splitmix64 finalizer) for values that look random but repeat. */
uint64_t cht_mix(uint64_t x);
double cht_value(int rank, size_t i);

/* Path to a built tool ("cohortrun") from COHORT_BUILD_DIR. */
const char *cht_tool(const char *name);
/* CLOCK_MONOTONIC in milliseconds: deadlines and elapsed times in tests. */
double cht_now_ms(void);
/* qsort's comparison for doubles (times to take percentiles of). */
int cht_cmp_double(const void *a, const void *b);

/* Counts /dev/shm entries and open fds of this process (leak checks). */
int cht_count_dev_shm(void);

#endif
