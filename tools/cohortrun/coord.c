/* coord.c - node agents (one cohortrun per node) agreeing through the job's
 * store. Only used with --nnodes > 1.
 *
 * Keys (all under "cohortrun/", beside the library's own "<gen>/..." keys):
 *   config           "nnodes=.. nproc=.. max_restarts=.." - the first agent
 *                    writes it, every other must match it
 *   node<k>          claimed by the agent of node k (a duplicate is refused)
 *   generation       the generation currently running (written at each join)
 *   g<G>/joined      counter; the agent that brings it to nnodes sets g<G>/go
 *   g<G>/fail        the generation's first failure (compare_set: first wins)
 *   g<G>/done        counter of nodes whose workers all exited 0; the last
 *                    sets g<G>/alldone
 *   g<G>/left        counter of agents leaving the job; the last sets
 *                    g<G>/allleft (the store's host waits for it)
 *
 * A generation ends on every node exactly when g<G>/fail or g<G>/alldone
 * exists, so a failure anywhere restarts every node: each agent tears its
 * workers down, then joins generation G+1, and no worker of G+1 starts
 * before every agent has reaped its workers of G.
 *
 * One store handle serves the main thread; a second one belongs to the
 * watcher thread, whose blocking wait must not hold up the main thread's
 * calls (cohort_store.h). The watcher waits in bounded slices and posts to
 * an eventfd that the generation's epoll loop watches.
 */
#include "cohortrun.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "cohort.h"

#define SLICE_MS 500       /* bounded store waits, re-issued until the deadline */
#define LEAVE_WAIT_MS 5000 /* the store's host waits this long for the others */

struct crun_coord {
    const crun_cfg *cfg;
    cohort_store *st;   /* main thread */
    cohort_store *wst;  /* watcher thread */
    int efd;
    pthread_t th;
    int th_running;
    uint32_t gen;
    atomic_int stop;
    atomic_int state;   /* CRUN_COORD_*; fail is written before state */
    crun_fail fail;
    int hosts_store;
    int refused; /* the join ended on another agent's refusal (refuse) */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void key(char *buf, size_t len, uint32_t gen, const char *what) /* buf: 96 bytes */
{
    snprintf(buf, len, "cohortrun/g%u/%s", gen, what);
}

static void encode(const crun_fail *f, char *buf, size_t len)
{
    snprintf(buf, len, "code=%d sig=%d rank=%d node=%d restart=%d desc=%s", f->code, f->signo,
             f->rank, f->node, f->restartable, f->desc);
}

static int decode(const char *s, size_t len, crun_fail *f)
{
    char tmp[512];
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    memcpy(tmp, s, len);
    tmp[len] = 0;
    memset(f, 0, sizeof *f);
    int used = 0;
    if (sscanf(tmp, "code=%d sig=%d rank=%d node=%d restart=%d desc=%n", &f->code, &f->signo,
               &f->rank, &f->node, &f->restartable, &used) != 5 || used == 0) {
        f->code = CRUN_EXIT_LAUNCHER;
        f->rank = -1;
        snprintf(f->desc, sizeof f->desc, "unreadable failure record in the store");
        return -1;
    }
    snprintf(f->desc, sizeof f->desc, "%s", tmp + used);
    return 0;
}

static int lost(crun_coord *c, cohort_store *st, const char *what, cohort_status s)
{
    crun_msg("node %d: the job's store failed during %s: %s: %s", c->cfg->node_rank, what,
             cohort_status_name(s), cohort_store_last_error(st));
    return -1;
}

static int clip(size_t n, int max)
{
    return n < (size_t)max ? (int)n : max;
}

/* An agent refused at start-up tells the others, while the job has not
 * started yet: they wait in the first join for every node, and would wait
 * for this one until --join-timeout (300 s) with "waiting for node 1 to
 * join" (session 38). Once the job runs, a refused extra agent leaves it
 * alone. */
static void refuse(crun_coord *c, const char *why)
{
    const void *gk[1] = {"cohortrun/generation"};
    size_t gl[1] = {20};
    int started = 0;
    char k[96];
    if (cohort_store_check(c->st, gk, gl, 1, &started) != COHORT_OK || started)
        return;
    key(k, sizeof k, 1, "refused");
    cohort_store_sets(c->st, k, why);
}

int crun_coord_open(crun_coord **out, const crun_cfg *cfg, const char *store_addr,
                    const char *job_id, const char *token)
{
    *out = NULL;
    crun_coord *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->cfg = cfg;
    c->efd = -1;
    c->hosts_store = !cfg->store_url && cfg->node_rank == 0;
    cohort_status s = cohort_store_connect(&c->st, store_addr, job_id, token, cfg->join_timeout_ms);
    if (s == COHORT_OK)
        s = cohort_store_connect(&c->wst, store_addr, job_id, token, cfg->join_timeout_ms);
    if (s != COHORT_OK) {
        crun_msg("node %d: cannot reach the job's store at %s within %d ms: %s: %s",
                 cfg->node_rank, store_addr, cfg->join_timeout_ms, cohort_status_name(s),
                 cohort_last_error(NULL));
        goto fail;
    }
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->efd < 0) {
        crun_msg("eventfd: %s", strerror(errno));
        goto fail;
    }

    /* Every agent must run the same shape of job. */
    char mine[128];
    snprintf(mine, sizeof mine, "nnodes=%d nproc=%d max_restarts=%d", cfg->nnodes, cfg->nproc,
             cfg->max_restarts);
    void *cur = NULL;
    size_t curlen = 0;
    s = cohort_store_compare_set(c->st, "cohortrun/config", 16, NULL, 0, mine, strlen(mine), &cur,
                                 &curlen);
    if (s != COHORT_OK) {
        lost(c, c->st, "start-up", s);
        goto fail;
    }
    int same = cur && curlen == strlen(mine) && !memcmp(cur, mine, curlen);
    if (!same) {
        char why[400];
        snprintf(why, sizeof why,
                 "node %d was started with '%s' but the job has '%.*s': every node needs the same "
                 "--nnodes, --nproc-per-node and --max-restarts",
                 cfg->node_rank, mine, cur ? clip(curlen, 128) : 0,
                 cur ? (char *)cur : "");
        crun_msg("%s", why);
        refuse(c, why);
        free(cur);
        goto fail;
    }
    free(cur);

    /* Claim this node rank: two agents with one --node-rank would give two
     * workers the same RANK. */
    char k[64], me[128], host[64] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(k, sizeof k, "cohortrun/node%d", cfg->node_rank);
    snprintf(me, sizeof me, "%s pid %d", host, (int)getpid());
    cur = NULL;
    s = cohort_store_compare_set(c->st, k, strlen(k), NULL, 0, me, strlen(me), &cur, &curlen);
    if (s != COHORT_OK) {
        lost(c, c->st, "start-up", s);
        goto fail;
    }
    same = cur && curlen == strlen(me) && !memcmp(cur, me, curlen);
    if (!same) {
        char why[400];
        snprintf(why, sizeof why,
                 "--node-rank %d is already taken in job '%s' by cohortrun on %.*s (cohortrun on "
                 "%s pid %d was refused)",
                 cfg->node_rank, job_id, cur ? clip(curlen, 128) : 0,
                 cur ? (char *)cur : "", host, (int)getpid());
        crun_msg("%s", why);
        refuse(c, why);
        free(cur);
        goto fail;
    }
    free(cur);
    *out = c;
    return 0;
fail:
    crun_coord_close(c);
    return -1;
}

void crun_coord_close(crun_coord *c)
{
    if (!c)
        return;
    crun_coord_unwatch(c);
    if (c->wst)
        cohort_store_close(c->wst);
    if (c->st)
        cohort_store_close(c->st);
    if (c->efd >= 0)
        close(c->efd);
    free(c);
}

/* A signal for the launcher, if one is pending (SIGCHLD is left alone: no
 * worker runs between generations, and the loop reaps with waitpid). */
static int pending_signal(int sigfd)
{
    struct pollfd p = {.fd = sigfd, .events = POLLIN};
    while (poll(&p, 1, 0) == 1) {
        struct signalfd_siginfo si;
        if (read(sigfd, &si, sizeof si) != (ssize_t)sizeof si)
            return 0;
        if (si.ssi_signo != SIGCHLD)
            return (int)si.ssi_signo;
    }
    return 0;
}

/* Names the nodes whose "joined/node<i>" mark is missing; returns how many. */
static int missing_nodes(crun_coord *c, uint32_t gen, char *missing, size_t len)
{
    const crun_cfg *cfg = c->cfg;
    char mark[32], k[96];
    size_t ml = 0;
    int nm = 0;
    missing[0] = 0;
    for (int i = 0; i < cfg->nnodes; i++) {
        snprintf(mark, sizeof mark, "joined/node%d", i);
        key(k, sizeof k, gen, mark);
        const void *kk[1] = {k};
        size_t kl[1] = {strlen(k)};
        int all = 0;
        if (cohort_store_check(c->st, kk, kl, 1, &all) == COHORT_OK && !all) {
            nm++;
            if (ml < len - 16)
                ml += (size_t)snprintf(missing + ml, len - ml, "%s%d", ml ? "," : "", i);
        }
    }
    return nm;
}

int crun_coord_join(crun_coord *c, uint32_t gen, int sigfd)
{
    const crun_cfg *cfg = c->cfg;
    char k[96], go[96];
    key(k, sizeof k, gen, "joined");
    key(go, sizeof go, gen, "go");
    int64_t n = 0;
    cohort_status s = cohort_store_add(c->st, k, strlen(k), 1, &n);
    if (s != COHORT_OK)
        return lost(c, c->st, "the join", s);
    char mark[32];
    snprintf(mark, sizeof mark, "joined/node%d", cfg->node_rank);
    key(k, sizeof k, gen, mark);
    s = cohort_store_sets(c->st, k, "1");
    if (s == COHORT_OK && n == cfg->nnodes) {
        char g[16];
        snprintf(g, sizeof g, "%u", gen);
        s = cohort_store_sets(c->st, "cohortrun/generation", g);
        if (s == COHORT_OK)
            s = cohort_store_sets(c->st, go, "1");
    }
    if (s != COHORT_OK)
        return lost(c, c->st, "the join", s);

    uint64_t start = now_ms(), deadline = start + (uint64_t)cfg->join_timeout_ms;
    /* Progress while waiting: every 10 s (a third of a shorter timeout),
     * naming the nodes that have not joined. */
    int third = cfg->join_timeout_ms / 3;
    uint64_t every = (uint64_t)(third < 1000 ? 1000 : third > 10000 ? 10000 : third);
    uint64_t next_report = start + every;
    char rf[96];
    key(rf, sizeof rf, gen, "refused");
    const void *keys[2] = {go, rf};
    size_t klens[2] = {strlen(go), strlen(rf)};
    for (;;) {
        int sig = pending_signal(sigfd);
        if (sig)
            return sig;
        uint64_t t = now_ms();
        if (t >= deadline)
            break;
        if (t >= next_report) {
            next_report = t + every;
            char missing[256];
            int nm = missing_nodes(c, gen, missing, sizeof missing);
            if (nm)
                crun_msg("node %d: generation %u: waiting for node%s %s to join (%d of %d "
                         "joined), %llu s of %d s",
                         cfg->node_rank, gen, nm > 1 ? "s" : "", missing, cfg->nnodes - nm,
                         cfg->nnodes, (unsigned long long)((t - start) / 1000),
                         cfg->join_timeout_ms / 1000);
        }
        int slice = (int)(deadline - t < SLICE_MS ? deadline - t : SLICE_MS);
        int which = -1;
        s = cohort_store_wait_any(c->st, keys, klens, 2, slice, &which);
        if (s == COHORT_OK && which == 0)
            return 0;
        if (s == COHORT_OK && which == 1) {
            void *v = NULL;
            size_t vl = 0;
            s = cohort_store_get(c->st, rf, strlen(rf), &v, &vl, SLICE_MS);
            if (s != COHORT_OK)
                return lost(c, c->st, "the join", s);
            crun_msg("node %d: generation %u: another agent of this job was refused, so not every "
                     "node can join: %.*s",
                     cfg->node_rank, gen, clip(vl, 400), (const char *)v);
            free(v);
            c->refused = 1;
            return -1;
        }
        if (s != COHORT_ERR_TIMEOUT)
            return lost(c, c->st, "the join", s);
    }
    /* Name the missing nodes. */
    char missing[256];
    missing_nodes(c, gen, missing, sizeof missing);
    crun_msg("node %d: generation %u: not every node joined within %d ms (missing node(s): %s); "
             "is cohortrun running there with the same --job-id, token and --master?",
             cfg->node_rank, gen, cfg->join_timeout_ms, missing[0] ? missing : "?");
    return -1;
}

static void post(crun_coord *c, int state)
{
    atomic_store(&c->state, state);
    uint64_t one = 1;
    ssize_t w = write(c->efd, &one, sizeof one);
    (void)w;
}

static void *watch_main(void *arg)
{
    crun_coord *c = arg;
    char kf[96], kd[96];
    key(kf, sizeof kf, c->gen, "fail");
    key(kd, sizeof kd, c->gen, "alldone");
    const void *keys[2] = {kf, kd};
    size_t klens[2] = {strlen(kf), strlen(kd)};
    while (!atomic_load(&c->stop)) {
        int which = -1;
        cohort_status s = cohort_store_wait_any(c->wst, keys, klens, 2, SLICE_MS, &which);
        if (s == COHORT_ERR_TIMEOUT)
            continue;
        if (s != COHORT_OK) {
            lost(c, c->wst, "the watch", s);
            post(c, CRUN_COORD_LOST);
            return NULL;
        }
        if (which == 1) {
            post(c, CRUN_COORD_ALLDONE);
            return NULL;
        }
        void *v = NULL;
        size_t vl = 0;
        s = cohort_store_get(c->wst, kf, strlen(kf), &v, &vl, SLICE_MS);
        if (s != COHORT_OK) {
            lost(c, c->wst, "reading the failure", s);
            post(c, CRUN_COORD_LOST);
            return NULL;
        }
        decode(v, vl, &c->fail);
        free(v);
        post(c, CRUN_COORD_FAILED);
        return NULL;
    }
    return NULL;
}

int crun_coord_watch(crun_coord *c, uint32_t gen)
{
    crun_coord_unwatch(c);
    uint64_t drop;
    while (read(c->efd, &drop, sizeof drop) > 0)
        ;
    c->gen = gen;
    atomic_store(&c->stop, 0);
    atomic_store(&c->state, CRUN_COORD_PENDING);
    int e = pthread_create(&c->th, NULL, watch_main, c);
    if (e) {
        crun_msg("cannot start the store watcher: %s", strerror(e));
        return -1;
    }
    c->th_running = 1;
    return c->efd;
}

int crun_coord_state(crun_coord *c, crun_fail *f)
{
    uint64_t drop;
    while (read(c->efd, &drop, sizeof drop) > 0)
        ;
    int st = atomic_load(&c->state);
    if (st == CRUN_COORD_FAILED)
        *f = c->fail;
    return st;
}

void crun_coord_unwatch(crun_coord *c)
{
    if (!c->th_running)
        return;
    /* The watcher re-checks stop after each bounded slice. */
    atomic_store(&c->stop, 1);
    pthread_join(c->th, NULL);
    c->th_running = 0;
}

int crun_coord_fail(crun_coord *c, uint32_t gen, const crun_fail *f, crun_fail *first)
{
    char k[96], rec[512];
    key(k, sizeof k, gen, "fail");
    encode(f, rec, sizeof rec);
    void *cur = NULL;
    size_t curlen = 0;
    cohort_status s =
        cohort_store_compare_set(c->st, k, strlen(k), NULL, 0, rec, strlen(rec), &cur, &curlen);
    if (s != COHORT_OK)
        return lost(c, c->st, "recording a failure", s);
    if (cur)
        decode(cur, curlen, first);
    else
        *first = *f;
    free(cur);
    return 0;
}

/* Counts this node in g<gen>/<what>; the node that completes the count
 * sets g<gen>/<all>. */
static cohort_status count_node(crun_coord *c, uint32_t gen, const char *what, const char *all)
{
    char k[96];
    key(k, sizeof k, gen, what);
    int64_t n = 0;
    cohort_status s = cohort_store_add(c->st, k, strlen(k), 1, &n);
    if (s == COHORT_OK && n == c->cfg->nnodes) {
        key(k, sizeof k, gen, all);
        s = cohort_store_sets(c->st, k, "1");
    }
    return s;
}

int crun_coord_done(crun_coord *c, uint32_t gen)
{
    cohort_status s = count_node(c, gen, "done", "alldone");
    if (s != COHORT_OK)
        return lost(c, c->st, "reporting completion", s);
    return 0;
}

void crun_coord_leave(crun_coord *c, uint32_t gen)
{
    cohort_status s = count_node(c, gen, "left", "allleft");
    if (s != COHORT_OK || !c->hosts_store)
        return;
    char k[96];
    if (c->refused) {
        /* A refused agent never joins, so never leaves: the host waits
         * for the agents that joined, which read the refusal too. */
        int64_t joined = 0, left = 0;
        key(k, sizeof k, gen, "joined");
        if (cohort_store_add(c->st, k, strlen(k), 0, &joined) != COHORT_OK)
            return;
        key(k, sizeof k, gen, "left");
        for (uint64_t end = now_ms() + LEAVE_WAIT_MS; now_ms() < end;) {
            if (cohort_store_add(c->st, k, strlen(k), 0, &left) != COHORT_OK || left >= joined)
                return;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        crun_msg("warning: not every node that joined acknowledged the end of the job within %d "
                 "ms; stopping the store anyway",
                 LEAVE_WAIT_MS);
        return;
    }
    /* The host keeps serving until every agent has read the outcome. */
    key(k, sizeof k, gen, "allleft");
    const void *keys[1] = {k};
    size_t klens[1] = {strlen(k)};
    s = cohort_store_wait(c->st, keys, klens, 1, LEAVE_WAIT_MS);
    if (s != COHORT_OK)
        crun_msg("warning: not every node acknowledged the end of the job within %d ms; "
                 "stopping the store anyway",
                 LEAVE_WAIT_MS);
}

int crun_coord_put_torch(crun_coord *c, uint32_t gen, const char *addr, int port)
{
    char k[96], v[300];
    key(k, sizeof k, gen, "torch");
    snprintf(v, sizeof v, "%d %s", port, addr);
    cohort_status s = cohort_store_sets(c->st, k, v);
    if (s != COHORT_OK)
        return lost(c, c->st, "publishing MASTER_ADDR/MASTER_PORT", s);
    return 0;
}

int crun_coord_get_torch(crun_coord *c, uint32_t gen, char *addr, size_t len, int *port)
{
    /* Node 0 writes it before it joins, so it is there once "go" is. */
    char k[96], *v = NULL;
    key(k, sizeof k, gen, "torch");
    cohort_status s = cohort_store_gets(c->st, k, &v, c->cfg->join_timeout_ms);
    if (s != COHORT_OK)
        return lost(c, c->st, "reading node 0's MASTER_ADDR/MASTER_PORT", s);
    int used = 0;
    if (sscanf(v, "%d %n", port, &used) != 1 || used == 0 || *port <= 0 || *port > 65535 ||
        !v[used] || strlen(v + used) >= len) {
        crun_msg("node %d: unreadable MASTER_ADDR/MASTER_PORT record '%s' in the job's store",
                 c->cfg->node_rank, v);
        free(v);
        return -1;
    }
    snprintf(addr, len, "%s", v + used);
    free(v);
    return 0;
}
