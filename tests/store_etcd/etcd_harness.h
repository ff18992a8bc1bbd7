/*
 * etcd_harness.h - real etcd clusters for tests: members on loopback on
 * free ports, data on tmpfs (/dev/shm/.cohort-etcd-*, hidden from the shm
 * leak counters), readiness read from /health with a deadline.
 *
 * Cleanup is guaranteed even when the test process dies: every member gets
 * PR_SET_PDEATHSIG=SIGKILL, and a guard process removes the data directory
 * once the test process is gone (eh_stop does it at once otherwise).
 */
#ifndef COHORT_TEST_ETCD_HARNESS_H
#define COHORT_TEST_ETCD_HARNESS_H

#include <sys/types.h>

#define EH_MAX 5

typedef struct eh_cluster {
    int n;
    pid_t pid[EH_MAX];       /* 0 once stopped */
    int client_port[EH_MAX];
    int peer_port[EH_MAX];
    char dir[256];           /* data root: <dir>/m<i>, <dir>/m<i>.log */
    char endpoints[512];     /* "http://127.0.0.1:p,..." (etcdctl --endpoints) */
    char hosts[512];         /* "127.0.0.1:p,..." (etcd:// address) */
    char initial[512];       /* --initial-cluster */
    pid_t guard;
    int guard_fd;            /* write end: EOF tells the guard we are gone */
} eh_cluster;

/* Starts an n-member cluster and waits (deadline_ms) until every member
 * reports healthy. Retries with new ports if one was taken meanwhile.
 * Returns 0, or -1 with the reason (and the members' log tails) on stderr. */
int eh_start(eh_cluster *c, int n, int deadline_ms);
/* Same; on_disk puts the data in $TMPDIR (or /tmp) instead of tmpfs, so
 * that etcd pays for its fsyncs as in production (benchmarks). */
int eh_start_opts(eh_cluster *c, int n, int deadline_ms, int on_disk);
/* Kills every member still running, waits for them, removes the data. */
void eh_stop(eh_cluster *c);
/* Sends sig to member i (SIGKILL: also reaps it). */
void eh_signal(eh_cluster *c, int i, int sig);
/* Restarts stopped member i on its ports and data; waits until healthy. */
int eh_restart(eh_cluster *c, int i, int deadline_ms);
/* Sum of the values of member i's /metrics lines that contain every one of
 * the (up to 3, NULL-ended) substrings; -1 on failure. */
double eh_metric(const eh_cluster *c, int i, const char *a, const char *b, const char *d);
/* "etcd://<hosts>/<prefix>" into out. */
const char *eh_addr(const eh_cluster *c, const char *prefix, char *out, size_t outlen);
/* Runs etcdctl against the cluster (root:rootpw once auth is on). argv is
 * NULL-terminated, without "etcdctl". Returns its exit status (0 ok). */
int eh_ctl(const eh_cluster *c, int as_root, const char *const *argv);
/* Enables auth: root user, and per job a user (password = token) with a
 * role granting readwrite on the prefix /<prefix>/<job>/. */
int eh_enable_auth(const eh_cluster *c, const char *prefix, const char *const *jobs,
                   const char *const *tokens, int njobs);
/* Makes member i the leader (etcdctl move-leader). 0 on success. */
int eh_move_leader(const eh_cluster *c, int i);
/* POSTs body to path on member i; the reply (<= cap) in out. HTTP status
 * or -1. auth: an "Authorization" token or NULL. */
int eh_post(const eh_cluster *c, int i, const char *path, const char *body, const char *auth,
            char *out, size_t cap);

#endif
