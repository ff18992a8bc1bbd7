/* fixture.c - forked ranks with hand-built groups for tcp transport tests. */
#include "fixture.h"
#include "support/support.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* ---- helpers ---- */

/* Setup failures in the test process (not ck_assert: tf_run also serves the
 * benchmark, outside any Check test). */
#define TF_REQUIRE(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fixture: %s:%d: %s: ", __FILE__, __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

uint64_t tf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void abs_deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000l;
    if (ts->tv_nsec >= 1000000000l) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000l;
    }
}

void tf_flag_set(tf_shared *sh, int idx, int v)
{
    pthread_mutex_lock(&sh->mu);
    sh->flags[idx] = v;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

int tf_flag_wait(tf_shared *sh, int idx, int v, int timeout_ms)
{
    struct timespec ts;
    abs_deadline(&ts, timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&sh->mu);
    while (sh->flags[idx] < v && rc == 0)
        rc = pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
    int ok = sh->flags[idx] >= v;
    pthread_mutex_unlock(&sh->mu);
    return ok ? 0 : -1;
}

void tf_record(tf_rank *r, cohort_status st)
{
    tf_shared *sh = r->sh;
    uint64_t t = tf_now_ns();
    char msg[COH_ERRLEN];
    /* g->err is written under err_mu (possibly by another thread). */
    pthread_mutex_lock(&r->g.err_mu);
    snprintf(msg, sizeof msg, "%s", r->g.err.msg);
    pthread_mutex_unlock(&r->g.err_mu);
    pthread_mutex_lock(&sh->mu);
    sh->status[r->rank] = st;
    sh->t_ns[r->rank] = t;
    snprintf(sh->msg[r->rank], sizeof sh->msg[r->rank], "%s", msg);
    pthread_mutex_unlock(&sh->mu);
}

int tf_connect(tf_rank *r)
{
    cohort_status st = cht_tp_up(&r->g, coh_net_connect(r->net));
    if (st != COHORT_OK) {
        tf_record(r, st);
        fprintf(stderr, "rank %d: connect: %s: %s\n", r->rank, cohort_status_name(st),
                r->g.err.msg);
        return 1;
    }
    return 0;
}

void tf_op(coh_xfer *op, tf_rank *r, const coh_call *c, int kind, int peer, int is_send,
           void *buf, size_t len, uint32_t step)
{
    memset(op, 0, sizeof *op);
    op->peer = peer;
    op->is_send = is_send;
    coh_hdr_from_call(&op->hdr, &r->g, c, kind, step, len);
    op->buf = buf;
    op->len = len;
}

cohort_status tf_send(tf_rank *r, const coh_call *c, int kind, int peer, const void *buf,
                      size_t len, uint32_t step)
{
    coh_xfer op;
    tf_op(&op, r, c, kind, peer, 1, (void *)buf, len, step);
    return cht_tp_up(&r->g, coh_net_xfer(r->net, c, &op, 1));
}

cohort_status tf_recv(tf_rank *r, const coh_call *c, int kind, int peer, void *buf, size_t len,
                      uint32_t step)
{
    coh_xfer op;
    tf_op(&op, r, c, kind, peer, 0, buf, len, step);
    return cht_tp_up(&r->g, coh_net_xfer(r->net, c, &op, 1));
}

void tf_fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *b = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = cht_mix(seed * 0x9e3779b97f4a7c15ull + i);
        memcpy(b + i, &v, 8);
    }
    for (; i < len; i++)
        b[i] = (unsigned char)cht_mix(seed * 0x9e3779b97f4a7c15ull + i);
}

long tf_check(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *b = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = cht_mix(seed * 0x9e3779b97f4a7c15ull + i);
        if (memcmp(b + i, &v, 8) != 0)
            return (long)i;
    }
    for (; i < len; i++)
        if (b[i] != (unsigned char)cht_mix(seed * 0x9e3779b97f4a7c15ull + i))
            return (long)i;
    return -1;
}

/* ---- rank process ---- */

static int rank_main(tf_shared *sh, const tf_opts *o, int rank, tf_fn fn, void *arg)
{
    cht_set_env(o->env);
    coh_log_set_rank(rank);
    static tf_rank r; /* big (cohort_group): not on the stack */
    memset(&r, 0, sizeof r);
    r.rank = rank;
    r.size = o->nranks;
    r.sh = sh;
    r.arg = arg;
    cohort_group *g = &r.g;
    cht_group_opts go = {.job = sh->job,
                         .token = sh->token,
                         .timeout_ms = o->timeout_ms ? o->timeout_ms : 20000,
                         .stall_warn_ms = -1,
                         .check_contract = 1,
                         .parts = CHT_G_PEERS | CHT_G_P2P | CHT_G_HOST};
    if (cht_group_init(g, rank, o->nranks, &go) != 0) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        return 2;
    }
    g->pid = getpid();
    if (o->tweak)
        o->tweak(rank, g, arg);

    char addr[80];
    cohort_status st = coh_net_listen(g, &r.net, addr, sizeof addr);
    if (st != COHORT_OK) {
        fprintf(stderr, "rank %d: listen: %s: %s\n", rank, cohort_status_name(st),
                coh_tls_err()->msg);
        return 2;
    }
    g->net = r.net;
    pthread_mutex_lock(&sh->mu);
    snprintf(sh->addr[rank], sizeof sh->addr[rank], "%s", addr);
    sh->pid[rank] = getpid();
    sh->nready++;
    pthread_cond_broadcast(&sh->cv);
    struct timespec ts;
    abs_deadline(&ts, 10000);
    int rc = 0;
    while (sh->nready < sh->n && rc == 0)
        rc = pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
    int all = sh->nready >= sh->n;
    for (int i = 0; i < g->size; i++) {
        const char *a = o->peer_addr ? o->peer_addr(rank, i, arg) : NULL;
        snprintf(g->peers[i].addr, sizeof g->peers[i].addr, "%s", a ? a : sh->addr[i]);
        g->peers[i].pid = sh->pid[i];
    }
    pthread_mutex_unlock(&sh->mu);
    if (!all) {
        fprintf(stderr, "rank %d: address exchange timed out\n", rank);
        return 3;
    }
    int ret = fn(&r);
    coh_net_destroy(r.net);
    g->net = NULL;
    return ret;
}

/* The rank body and the parent callback, run by cht_spawn. */
typedef struct tf_ctx {
    tf_shared *sh;
    const tf_opts *o;
    tf_fn fn;
    void *arg;
} tf_ctx;

static int tf_child(int rank, void *p)
{
    tf_ctx *c = p;
    return rank_main(c->sh, c->o, rank, c->fn, c->arg);
}

static int tf_parent(void *p)
{
    tf_ctx *c = p;
    return c->o->parent(c->sh, c->arg);
}

tf_shared *tf_run(const tf_opts *o, tf_fn fn, void *arg, tf_result *res)
{
    memset(res, 0, sizeof *res);
    tf_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TF_REQUIRE(sh != MAP_FAILED, "mmap: %s", strerror(errno));
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->mu, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sh->cv, &ca);
    int n = o->nranks;
    TF_REQUIRE(n >= 1 && n <= TF_MAX, "%d ranks", n);
    sh->n = n;
    res->n = n;
    snprintf(sh->job, sizeof sh->job, "tcptest-%d-%llu", (int)getpid(),
             (unsigned long long)(tf_now_ns() % 1000000007ull));
    unsigned char rnd[16];
    TF_REQUIRE(coh_random(rnd, sizeof rnd) == COHORT_OK, "random");
    for (int i = 0; i < 16; i++)
        snprintf(sh->token + 2 * i, 3, "%02x", rnd[i]);
    for (int i = 0; i < TF_MAX; i++)
        sh->status[i] = -1;

    tf_ctx ctx = {.sh = sh, .o = o, .fn = fn, .arg = arg};
    cht_result cr;
    memset(&cr, 0, sizeof cr);
    TF_REQUIRE(cht_spawn(n, o->deadline_ms, 0, tf_child, o->parent ? tf_parent : NULL, &ctx,
                         &cr) >= 0,
               "fork failed");
    for (int r = 0; r < n; r++) {
        res->exit[r] = cr.status[r];
        res->hung[r] = cr.hung[r];
    }
    res->parent = cr.parent;
    return sh;
}

void tf_done(tf_shared *sh)
{
    if (sh)
        munmap(sh, sizeof *sh);
}

void tf_assert_ok(const tf_shared *sh, const tf_result *res)
{
    char msg[4096] = "";
    size_t pos = 0;
    int bad = 0;
    for (int i = 0; i < res->n; i++)
        if (res->exit[i] || res->hung[i]) {
            bad = 1;
            int w = snprintf(msg + pos, sizeof msg - pos, " rank %d: %s %d (%s: %s);", i,
                             res->hung[i] ? "hung, killed" : "exit", res->exit[i],
                             sh->status[i] >= 0 ? cohort_status_name(sh->status[i]) : "-",
                             sh->msg[i]);
            if (w < 0 || (size_t)w >= sizeof msg - pos)
                break;
            pos += (size_t)w;
        }
    ck_assert_msg(!bad, "ranks failed:%s", msg);
}
