/* harness.c - see harness.h. */
#include "harness.h"
#include "support/group.h"
#include "support/support.h"

#include "contract/contract.h"
#include "group/monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static th_shared *shared;
static cohort_store_server *srv;  /* hosted by rank 0 in MASTER_PORT mode */
static cohort_store *root_conn;   /* one connection per process, shared */
static char store_url[128];

/* The process's store connection (see harness.h for the two modes). */
static cohort_store *store_root(const char *job, const char *token)
{
    if (root_conn)
        return root_conn;
    const char *url = getenv("COHORT_STORE"), *port = getenv("MASTER_PORT"),
               *rank = getenv("RANK");
    if (url) {
        snprintf(store_url, sizeof store_url, "%s", url);
    } else if (port) {
        if (rank && !strcmp(rank, "0")) {
            cohort_store_server_opts o;
            memset(&o, 0, sizeof o);
            o.bind_addr = "127.0.0.1";
            o.port = atoi(port);
            o.job_ids = &job;
            o.tokens = &token;
            o.n_jobs = 1;
            if (cohort_store_server_start(&srv, &o) != COHORT_OK)
                return NULL;
        }
        snprintf(store_url, sizeof store_url, "127.0.0.1:%s", port);
    } else {
        return NULL;
    }
    if (cohort_store_connect(&root_conn, store_url, job, token, 10000) != COHORT_OK)
        root_conn = NULL;
    return root_conn;
}

const char *th_errmsg(cohort_group *g)
{
    static char msg[COH_ERRLEN];
    pthread_mutex_lock(&g->err_mu);
    memcpy(msg, g->err.msg, sizeof msg);
    pthread_mutex_unlock(&g->err_mu);
    return msg;
}

void th_done(int nranks)
{
    atomic_fetch_add(&shared->flag[15], 1);
    if (!srv)
        return;
    uint64_t end = coh_now_ns() + 20000000000ull;
    while (atomic_load(&shared->flag[15]) < nranks && coh_now_ns() < end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* bounded wait for a condition, not a sync sleep */
    }
}

th_shared *th_shared_init(void)
{
    if (shared)
        munmap(shared, sizeof *shared);
    void *p = mmap(NULL, sizeof(th_shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    shared = p == MAP_FAILED ? NULL : p;
    return shared;
}

th_shared *th_sh(void) { return shared; }

void th_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void th_wait_flag(int i, int deadline_ms)
{
    uint64_t end = coh_now_ns() + (uint64_t)deadline_ms * 1000000ull;
    while (!atomic_load(&shared->flag[i])) {
        RANK_CHECK(coh_now_ns() < end, "flag %d never set", i);
        th_sleep_ms(1);
    }
}

size_t th_dtype_size(int dt)
{
    static const size_t t[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return dt >= 0 && dt < COHORT_DTYPE_COUNT ? t[dt] : 0;
}

const char *th_dtype_name(int dt)
{
    static const char *t[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                              "uint64",  "float16",  "bfloat16", "float32", "float64"};
    return dt >= 0 && dt < COHORT_DTYPE_COUNT ? t[dt] : "?";
}

cohort_group *th_group_bare(int rank, int n, int timeout_ms)
{
    const char *job = getenv("COHORT_JOB_ID"), *tok = getenv("COHORT_TOKEN"),
               *cc = getenv("COHORT_CONTRACT");
    cht_group_opts o = {.job = job ? job : "shm-test",
                        .token = tok ? tok : "shm-test-token",
                        .timeout_ms = timeout_ms,
                        .stall_warn_ms = -1,
                        .check_contract = !(cc && !strcmp(cc, "off")),
                        .parts = CHT_G_PEERS | CHT_G_HOST | CHT_G_LOCAL};
    cohort_group *g = cht_group_new(rank, n, &o);
    if (!g)
        return NULL;
    g->pid = getpid();
    g->fork_gen = coh_fork_generation();
    if (getenv("COHORT_STORE") || getenv("MASTER_PORT")) {
        g->store_root = store_root(g->job_id, g->token);
        /* the same key prefix the group module and its monitor use */
        snprintf(g->store_addr, sizeof g->store_addr, "%s", store_url);
        if (!g->store_root ||
            cohort_store_prefixed(g->store_root, "gen1/g0/", &g->store) != COHORT_OK) {
            fprintf(stderr, "rank %d: no store at %s\n", rank, store_url);
            th_group_free(g);
            return NULL;
        }
        coh_monitor_attach(g); /* abort records, probes, stall reports */
    }
    /* pids for error messages, through the store like a rendezvous would */
    if (!g->store)
        return g;
    char key[32], val[32];
    snprintf(key, sizeof key, "pid/%d", rank);
    snprintf(val, sizeof val, "%d", (int)getpid());
    cohort_store_sets(g->store, key, val);
    for (int r = 0; r < n; r++) {
        char *v = NULL;
        snprintf(key, sizeof key, "pid/%d", r);
        if (cohort_store_gets(g->store, key, &v, timeout_ms < 0 ? 60000 : timeout_ms) ==
            COHORT_OK) {
            g->peers[r].pid = atoi(v);
            free(v);
        }
    }
    return g;
}

cohort_group *th_group(int rank, int n, int timeout_ms, cohort_status *st)
{
    cohort_group *g = th_group_bare(rank, n, timeout_ms);
    if (!g) {
        *st = COHORT_ERR_NOMEM;
        return NULL;
    }
    *st = cht_tp_up(g, coh_shm_create(g, &g->shm));
    if (*st != COHORT_OK) {
        fprintf(stderr, "rank %d: coh_shm_create: %s: %s\n", rank, cohort_status_name(*st),
                g->err.msg);
        th_group_free(g);
        return NULL;
    }
    /* As the group module does after its transports exist: the monitor
     * thread answers peers' stall probes and carries aborts. */
    if (g->store && coh_monitor_start(g) != COHORT_OK)
        fprintf(stderr, "rank %d: monitor: %s\n", rank, cohort_last_error(NULL));
    return g;
}

void th_group_free(cohort_group *g)
{
    if (!g)
        return;
    if (g->monitor)
        coh_monitor_stop(g);
    coh_shm_destroy(g->shm);
    g->shm = NULL;
    if (g->store)
        cohort_store_close(g->store); /* the root connection is the process's */
    cht_group_free(g);
}

cohort_status th_private_ns(cohort_group *g, const char *prefix, const char *key)
{
    coh_monitor_stop(g); /* it would watch the group's namespace */
    void *val = NULL;
    size_t len = 0;
    cohort_status st = COHORT_OK;
    if (key)
        st = cohort_store_get(g->store, key, strlen(key), &val, &len, 10000);
    if (st == COHORT_OK) {
        cohort_store_close(g->store);
        g->store = NULL;
        st = cohort_store_prefixed(g->store_root, prefix, &g->store);
    }
    if (st == COHORT_OK && key)
        st = cohort_store_set(g->store, key, strlen(key), val, len);
    free(val);
    return st;
}

size_t th_ring_default_k(int n, size_t ring_bytes)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    size_t deep = 64 * ring_bytes;
    return n == 2 && deep <= (1u << 20) && l2 > 0 && 2 * deep <= (size_t)l2 ? 64 : 8;
}

coh_call th_call(cohort_group *g, int coll, int dtype, int redop, int root, uint64_t count)
{
    return cht_call(++g->seq, coll, dtype, redop, root, 0, count, __FILE__, __LINE__);
}
