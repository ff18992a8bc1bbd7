/*
 * fixture.h - hand-built groups for tcp transport tests (no store, no group
 * init): the test process forks N rank processes; each fills a cohort_group
 * by hand, calls coh_net_listen, publishes its address in a shared anonymous
 * page created before fork, waits (bounded) for everyone's, then runs the
 * test body. Ranks report through their exit status and the shared page
 * (status, message, time of the error); the test process asserts.
 * The groups have no store: the monitor's store-backed parts (probe, peer
 * state in stall reports, abort records) find nothing and stay quiet, so
 * these tests see the transport's own detection only.
 */
#ifndef TF_FIXTURE_H
#define TF_FIXTURE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/group.h"
#include "support/group.h"
#include "transport/tcp/tcp.h"

#define TF_MAX 16
#define TF_FLAGS 16

typedef struct tf_shared {
    pthread_mutex_t mu; /* process-shared */
    pthread_cond_t cv;  /* process-shared, CLOCK_MONOTONIC */
    int n;
    int nready;
    char addr[TF_MAX][80];
    pid_t pid[TF_MAX];
    char job[64];
    char token[65];
    /* results, written by each rank */
    int status[TF_MAX];
    char msg[TF_MAX][1100];
    uint64_t t_ns[TF_MAX];   /* CLOCK_MONOTONIC when the rank recorded its result */
    uint64_t t_event_ns;     /* e.g. when the test process killed a rank */
    int flags[TF_FLAGS];
    long val[TF_MAX];        /* free per-rank numbers (bench results etc.) */
} tf_shared;

typedef struct tf_rank {
    int rank, size;
    cohort_group g;
    coh_net *net;
    tf_shared *sh;
    void *arg;
} tf_rank;

/* Per-rank group tweaks applied before listen (NULL/0: defaults). */
typedef struct tf_opts {
    int nranks;
    int timeout_ms;      /* group timeout; default 20000 */
    int deadline_ms;     /* kill everything after this; default 60000 */
    const char *env;     /* "K=V;K2=V2" set in every rank before listen */
    /* optional per-rank identity changes (wrong token / job / generation / group) */
    void (*tweak)(int rank, cohort_group *g, void *arg);
    /* optional: the address `rank` uses for `peer` (NULL: the published one) */
    const char *(*peer_addr)(int rank, int peer, void *arg);
    /* runs in the test process after the ranks are forked; its return value
     * is passed back as tf_result.parent */
    int (*parent)(tf_shared *sh, void *arg);
} tf_opts;

typedef struct tf_result {
    int n;
    int exit[TF_MAX];    /* exit code, or 128+signal */
    int hung[TF_MAX];
    int parent;
} tf_result;

/* Body of a rank: runs after listen + address exchange, before connect (call
 * tf_connect or coh_net_connect). Returns the exit code (0 = pass). */
typedef int (*tf_fn)(tf_rank *r);

/* Forks and runs; returns the shared page (valid until tf_done). */
tf_shared *tf_run(const tf_opts *o, tf_fn fn, void *arg, tf_result *res);
void tf_done(tf_shared *sh);
/* ck_asserts that every rank exited 0 (prints their messages otherwise). */
void tf_assert_ok(const tf_shared *sh, const tf_result *res);

/* In a rank: connect, or record the failure and return nonzero. */
int tf_connect(tf_rank *r);
/* Records this rank's result in the shared page. */
void tf_record(tf_rank *r, cohort_status st);
/* Shared flags (bounded waits; return 0 on success, -1 on timeout). */
void tf_flag_set(tf_shared *sh, int idx, int v);
int tf_flag_wait(tf_shared *sh, int idx, int v, int timeout_ms);

/* Ops. */
/* cht_call with a site per seq (file "test_tcp.c", line seq % 1000). */
static inline coh_call tf_call(uint64_t seq, int coll, int dtype, int redop, int root, int tag,
                               uint64_t count)
{
    return cht_call(seq, coll, dtype, redop, root, tag, count, "test_tcp.c", (int)(seq % 1000));
}
void tf_op(coh_xfer *op, tf_rank *r, const coh_call *c, int kind, int peer, int is_send,
           void *buf, size_t len, uint32_t step);
/* One-op transfers. */
cohort_status tf_send(tf_rank *r, const coh_call *c, int kind, int peer, const void *buf,
                      size_t len, uint32_t step);
cohort_status tf_recv(tf_rank *r, const coh_call *c, int kind, int peer, void *buf, size_t len,
                      uint32_t step);

void tf_fill(void *buf, size_t len, uint64_t seed);
/* Returns the first differing offset, or -1 when buf matches the pattern. */
long tf_check(const void *buf, size_t len, uint64_t seed);

uint64_t tf_now_ns(void);

#define TF_CHECK(r, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: check failed at %s:%d: %s: ", (r)->rank, __FILE__, __LINE__, \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define TF_OK(r, expr)                                                                             \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        TF_CHECK(r, st_ == COHORT_OK, "%s: %s", cohort_status_name(st_), (r)->g.err.msg);          \
    } while (0)

#endif
