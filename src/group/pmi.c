/*
 * pmi.c - the launcher's process-management interface, for what a rank of
 * an mpirun/mpiexec job cannot read from its environment (pmi.h): where
 * rank 0 runs (across nodes) and a fresh secret shared by the job's ranks.
 *
 *   - Open MPI (and any PMIx server: PMIX_NAMESPACE + PMIX_SERVER_URI*):
 *     libpmix is dlopen'ed, never linked (libcohort stays libc + pthreads +
 *     libsodium), with the few PMIx v3/v4 ABI types it needs declared here.
 *     Every rank reads PMIX_HOSTNAME of rank 0; rank 0 puts the token,
 *     everyone fences, the others get it; then PMIx_Finalize.
 *   - MPICH's Hydra (PMI_FD, PMI_RANK): PMI-1's text protocol over the
 *     inherited socket (pmi_wire.c): init, get_my_kvsname, rank 0 puts its
 *     host and the token, barrier_in/barrier_out, get, finalize (Hydra
 *     kills a job whose rank exits between init and finalize).
 *
 * Neither is used in a process that has an MPI library loaded: MPI owns
 * the connection. Under Hydra a finalize closes PMI_FD (MPI_Init after it
 * fails), an open one makes MPI's and cohort's requests share the socket;
 * under Open MPI, PMIx cannot be initialised again after a finalize (a
 * later MPI_Init fails) and a rank exiting without one is an "abnormal
 * termination". MPI programs take the file-based or exported token, or
 * libcohort-mpi, which bootstraps through MPI itself.
 */
#include "group/pmi.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "group/pmi_wire.h"
#include "util/util.h"

extern char **environ;

/* ---- which interface, if any ---- */

static int find_mpi(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    const char *n = info->dlpi_name;
    if (!n || !*n)
        return 0;
    const char *b = strrchr(n, '/');
    b = b ? b + 1 : n;
    if (!strncmp(b, "libmpi.", 7) || !strncmp(b, "libmpi_", 7) || !strncmp(b, "libmpich", 8)) {
        snprintf(arg, 128, "%s", b);
        return 1;
    }
    return 0;
}

static int pmix_server_env(void)
{
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "PMIX_SERVER_URI", 15))
            return 1;
    return 0;
}

/* libpmix, loaded once and kept (its threads end at PMIx_Finalize, its
 * code may still be on a stack until then). */
static void *pmix_lib;
static char pmix_dlerror[200];

static int use_pmix(void)
{
    return coh_env_str("PMIX_NAMESPACE") && coh_env_str("PMIX_RANK") && pmix_server_env();
}

static int pmix_open(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (!pmix_lib) {
        pmix_lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!pmix_lib)
            pmix_lib = dlopen("libpmix.so", RTLD_NOW | RTLD_LOCAL);
        if (!pmix_lib) {
            const char *e = dlerror();
            snprintf(pmix_dlerror, sizeof pmix_dlerror, "%s", e ? e : "not found");
        }
    }
    int ok = pmix_lib != NULL;
    pthread_mutex_unlock(&mu);
    return ok;
}

int coh_pmi_available(const char **why)
{
    static __thread char msg[256]; /* the why of this thread's init */
    const char *mode = coh_env_str("COHORT_PMI");
    if (mode && !strcmp(mode, "off")) {
        *why = "COHORT_PMI=off";
        return 0;
    }
    char lib[128];
    if (dl_iterate_phdr(find_mpi, lib)) {
        snprintf(msg, sizeof msg,
                 "this process has an MPI library loaded (%s), which owns the launcher's PMI "
                 "connection",
                 lib);
        *why = msg;
        return 0;
    }
    if (use_pmix()) {
        if (pmix_open())
            return 1;
        /* no libpmix: PMI-1 if the launcher offers it too, else fall back */
        if (!(coh_env_str("PMI_FD") && coh_env_str("PMI_RANK"))) {
            snprintf(msg, sizeof msg,
                     "started by a PMIx launcher, but libpmix cannot be loaded (%.160s)",
                     pmix_dlerror);
            *why = msg;
            return 0;
        }
    }
    if (coh_env_str("PMI_FD") && coh_env_str("PMI_RANK"))
        return 1;
    *why = "the launcher offers neither PMIx (PMIX_NAMESPACE, PMIX_SERVER_URI) nor PMI-1 (PMI_FD)";
    return 0;
}

/* ---- PMIx, through dlopen ---- */

/* The PMIx v3/v4 client ABI, as far as used here (pmix_common.h). */
typedef struct px_proc {
    char nspace[256]; /* PMIX_MAX_NSLEN + 1 */
    uint32_t rank;
} px_proc;
typedef struct px_value {
    uint16_t type;
    union {
        char *string;
        uint64_t space[3]; /* the union's size (pmix_envar_t) */
    } data;
} px_value;
#define PX_STRING 3
#define PX_GLOBAL 3
#define PX_HOSTNAME "pmix.hname"

typedef struct px_api {
    int (*init)(px_proc *, void *, size_t);
    int (*finalize)(const void *, size_t);
    int (*get)(const px_proc *, const char *, const void *, size_t, px_value **);
    int (*put)(uint8_t, const char *, px_value *);
    int (*commit)(void);
    int (*fence_nb)(const px_proc *, size_t, const void *, size_t, void (*)(int, void *),
                    void *);
    void (*value_destruct)(px_value *);
} px_api;

/* A fence that outlives its caller's timeout writes here, not to a stack. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status;
} fence = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void fence_done(int status, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fence.mu);
    fence.done = 1;
    fence.status = status;
    pthread_cond_broadcast(&fence.cv);
    pthread_mutex_unlock(&fence.mu);
}

static void px_free(const px_api *px, px_value *v)
{
    if (!v)
        return;
    px->value_destruct(v);
    free(v);
}

/* A string value of (nspace, rank, key), copied to out. */
static cohort_status px_get_string(const px_api *px, const px_proc *who, const char *key,
                                   char *out, size_t len)
{
    px_value *v = NULL;
    int rc = px->get(who, key, NULL, 0, &v);
    if (rc != 0 || !v)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "PMIx_Get(%s of rank %u) failed with PMIx status %d", key,
                           (unsigned)who->rank, rc);
    if (v->type != PX_STRING || !v->data.string || strlen(v->data.string) >= len ||
        !v->data.string[0]) {
        px_free(px, v);
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "PMIx_Get(%s of rank %u): not a string of 1..%zu bytes", key,
                           (unsigned)who->rank, len - 1);
    }
    snprintf(out, len, "%s", v->data.string);
    px_free(px, v);
    return COHORT_OK;
}

static void make_token(char *hex, size_t len, cohort_status *st)
{
    unsigned char raw[32];
    *st = coh_random(raw, sizeof raw);
    if (*st != COHORT_OK)
        return;
    for (size_t i = 0; i < sizeof raw && 2 * i + 2 < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
}

static cohort_status pmix_exchange(int want_token, int timeout_ms, coh_pmi_result *out)
{
    if (!pmix_open())
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED,
                           "started by a PMIx launcher, but libpmix cannot be loaded (%s)",
                           pmix_dlerror);
    void *h = pmix_lib;
    px_api px;
    *(void **)&px.init = dlsym(h, "PMIx_Init");
    *(void **)&px.finalize = dlsym(h, "PMIx_Finalize");
    *(void **)&px.get = dlsym(h, "PMIx_Get");
    *(void **)&px.put = dlsym(h, "PMIx_Put");
    *(void **)&px.commit = dlsym(h, "PMIx_Commit");
    *(void **)&px.fence_nb = dlsym(h, "PMIx_Fence_nb");
    *(void **)&px.value_destruct = dlsym(h, "PMIx_Value_destruct");
    if (!px.init || !px.finalize || !px.get || !px.put || !px.commit || !px.fence_nb ||
        !px.value_destruct)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "libpmix lacks PMIx_Init/Get/Put/Commit/Fence_nb/Finalize: not a "
                           "PMIx v3 or v4 client library");
    px_proc me;
    memset(&me, 0, sizeof me);
    int rc = px.init(&me, NULL, 0);
    if (rc != 0)
        /* stale PMIX_* variables (a program started from inside another
         * job's rank): no launcher to ask, as if there were no PMIx */
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED,
                           "PMIx_Init failed with PMIx status %d: PMIX_NAMESPACE is set, but no "
                           "PMIx server answered",
                           rc);
    me.nspace[sizeof me.nspace - 1] = 0;
    snprintf(out->job, sizeof out->job, "%s", me.nspace);
    px_proc r0 = me;
    r0.rank = 0;
    cohort_status st = px_get_string(&px, &r0, PX_HOSTNAME, out->master, sizeof out->master);
    if (st == COHORT_OK && want_token) {
        if (me.rank == 0) {
            make_token(out->token, sizeof out->token, &st);
            if (st == COHORT_OK) {
                px_value v;
                memset(&v, 0, sizeof v);
                v.type = PX_STRING;
                v.data.string = out->token;
                rc = px.put(PX_GLOBAL, "cohort.token", &v);
                if (rc == 0)
                    rc = px.commit();
                if (rc != 0)
                    st = coh_err_set(NULL, COHORT_ERR_INVALID,
                                     "PMIx_Put/Commit of the job's token failed with PMIx "
                                     "status %d",
                                     rc);
            }
        }
        if (st == COHORT_OK) {
            pthread_mutex_lock(&fence.mu);
            fence.done = 0;
            pthread_mutex_unlock(&fence.mu);
            rc = px.fence_nb(NULL, 0, NULL, 0, fence_done, NULL);
            if (rc != 0)
                st = coh_err_set(NULL, COHORT_ERR_INVALID,
                                 "PMIx_Fence failed with PMIx status %d", rc);
        }
        if (st == COHORT_OK) {
            uint64_t dl = coh_deadline_ns(timeout_ms);
            pthread_mutex_lock(&fence.mu);
            while (!fence.done && coh_ms_left(dl) > 0) {
                struct timespec ts;
                coh_abstime_ms(&ts, 50);
                pthread_cond_timedwait(&fence.cv, &fence.mu, &ts);
            }
            int done = fence.done, fst = fence.status;
            pthread_mutex_unlock(&fence.mu);
            if (!done)
                /* no finalize: the fence is still pending in PMIx */
                return coh_err_set(NULL, COHORT_ERR_TIMEOUT,
                                   "rank %u waited %d ms in PMIx_Fence for the job's other "
                                   "ranks to start cohort_init (COHORT_TIMEOUT)",
                                   (unsigned)me.rank, timeout_ms);
            if (fst != 0)
                st = coh_err_set(NULL, COHORT_ERR_INVALID,
                                 "PMIx_Fence completed with PMIx status %d", fst);
        }
        if (st == COHORT_OK && me.rank != 0) {
            st = px_get_string(&px, &r0, "cohort.token", out->token, sizeof out->token);
            if (st != COHORT_OK) {
                char why[400];
                snprintf(why, sizeof why, "%s", cohort_last_error(NULL));
                st = coh_err_set(NULL, COHORT_ERR_INVALID,
                                 "rank 0 published no token through PMIx (is COHORT_TOKEN "
                                 "exported to rank 0 only?): %s",
                                 why);
            }
        }
    }
    /* Tells the server this rank is done with it (a rank that exits
     * without it is an "abnormal termination" to mpirun). */
    px.finalize(NULL, 0);
    out->via = "PMIx";
    return st;
}

/* ---- PMI-1 over PMI_FD (MPICH's Hydra) ---- */

typedef struct pmi1 {
    int fd;
    uint64_t dl;
    size_t have;
    char buf[COH_PMI_LINE_MAX + 2];
} pmi1;

static cohort_status pmi1_wait(pmi1 *p, short ev, const char *doing)
{
    for (;;) {
        int left = coh_ms_left(p->dl);
        if (left <= 0)
            return coh_err_set(NULL, COHORT_ERR_TIMEOUT,
                               "waited COHORT_TIMEOUT for MPICH's launcher (PMI_FD) to %s",
                               doing);
        struct pollfd pf = {p->fd, ev, 0};
        int r = poll(&pf, 1, left);
        if (r > 0)
            return COHORT_OK;
        if (r < 0 && errno != EINTR)
            return coh_err_sys(NULL, COHORT_ERR_INVALID, "poll", errno, "PMI_FD %d", p->fd);
    }
}

/* Sends a request built from fields (cmd first). */
static cohort_status pmi1_send(pmi1 *p, const coh_pmi_msg *m)
{
    char line[COH_PMI_LINE_MAX + 2];
    int n = coh_pmi_format(m, line, sizeof line);
    if (n < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "PMI request '%s' too long", m->f[0].val);
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = send(p->fd, line + off, (size_t)n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            cohort_status st = pmi1_wait(p, POLLOUT, "take a request");
            if (st != COHORT_OK)
                return st;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        return coh_err_sys(NULL, COHORT_ERR_INVALID, "send", errno,
                           "PMI request cmd=%s to MPICH's launcher on PMI_FD %d", m->f[0].val,
                           p->fd);
    }
    return COHORT_OK;
}

/* Reads the reply to a request and checks it is cmd=want with rc=0. */
static cohort_status pmi1_recv(pmi1 *p, const char *want, coh_pmi_msg *m)
{
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->have);
        if (nl) {
            size_t len = (size_t)(nl - p->buf) + 1;
            char err[96];
            int r = coh_pmi_parse(p->buf, len, m, err, sizeof err);
            memmove(p->buf, p->buf + len, p->have - len);
            p->have -= len;
            if (r < 0)
                return coh_err_set(NULL, COHORT_ERR_PROTOCOL,
                                   "malformed PMI reply from MPICH's launcher (waiting for "
                                   "cmd=%s): %s",
                                   want, err);
            if (strcmp(m->f[0].val, want))
                return coh_err_set(NULL, COHORT_ERR_PROTOCOL,
                                   "MPICH's launcher answered cmd=%.64s where cmd=%s was due",
                                   m->f[0].val, want);
            const char *rc = coh_pmi_get(m, "rc");
            if (rc && strcmp(rc, "0")) {
                const char *msg = coh_pmi_get(m, "msg");
                return coh_err_set(NULL, COHORT_ERR_INVALID,
                                   "MPICH's launcher refused (cmd=%s rc=%.16s%s%.200s)", want, rc,
                                   msg ? " msg=" : "", msg ? msg : "");
            }
            return COHORT_OK;
        }
        if (p->have >= COH_PMI_LINE_MAX + 1)
            return coh_err_set(NULL, COHORT_ERR_PROTOCOL,
                               "PMI reply from MPICH's launcher longer than %d bytes",
                               COH_PMI_LINE_MAX);
        cohort_status st = pmi1_wait(p, POLLIN, want);
        if (st != COHORT_OK)
            return st;
        ssize_t r = recv(p->fd, p->buf + p->have, sizeof p->buf - 1 - p->have, MSG_DONTWAIT);
        if (r > 0)
            p->have += (size_t)r;
        else if (r == 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "MPICH's launcher closed PMI_FD while cohort waited for cmd=%s",
                               want);
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return coh_err_sys(NULL, COHORT_ERR_INVALID, "recv", errno, "PMI_FD %d", p->fd);
    }
}

static void msg_set(coh_pmi_msg *m, int i, const char *k, const char *v)
{
    snprintf(m->f[i].key, sizeof m->f[i].key, "%s", k);
    snprintf(m->f[i].val, sizeof m->f[i].val, "%s", v);
    if (m->n < i + 1)
        m->n = i + 1;
}

/* One request, one reply. */
static cohort_status pmi1_call(pmi1 *p, coh_pmi_msg *m, const char *want)
{
    cohort_status st = pmi1_send(p, m);
    return st == COHORT_OK ? pmi1_recv(p, want, m) : st;
}

static cohort_status pmi1_put(pmi1 *p, const char *kvs, const char *key, const char *val)
{
    coh_pmi_msg m = {0};
    msg_set(&m, 0, "cmd", "put");
    msg_set(&m, 1, "kvsname", kvs);
    msg_set(&m, 2, "key", key);
    msg_set(&m, 3, "value", val);
    return pmi1_call(p, &m, "put_result");
}

static cohort_status pmi1_get(pmi1 *p, const char *kvs, const char *key, char *out, size_t len)
{
    coh_pmi_msg m = {0};
    msg_set(&m, 0, "cmd", "get");
    msg_set(&m, 1, "kvsname", kvs);
    msg_set(&m, 2, "key", key);
    cohort_status st = pmi1_call(p, &m, "get_result");
    if (st != COHORT_OK)
        return st;
    const char *v = coh_pmi_get(&m, "value");
    if (!v || !coh_pmi_value_ok(v) || strlen(v) >= len)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "MPICH's launcher returned no usable value for %s (1..%zu bytes)", key,
                           len - 1);
    snprintf(out, len, "%s", v);
    return COHORT_OK;
}

static cohort_status pmi1_exchange(int want_token, int timeout_ms, coh_pmi_result *out)
{
    long fd = -1, rank = -1;
    if (coh_env_int("PMI_FD", &fd) != 1 || fd < 0 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "PMI_FD='%s' is not an open file descriptor (MPICH's launcher "
                           "passes its PMI connection there)",
                           getenv("PMI_FD"));
    if (coh_env_int("PMI_RANK", &rank) != 1 || rank < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "PMI_RANK='%s' is not a rank",
                           getenv("PMI_RANK"));
    pmi1 *p = calloc(1, sizeof *p);
    if (!p)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "PMI-1 client state");
    p->fd = (int)fd;
    p->dl = coh_deadline_ns(timeout_ms);
    coh_pmi_msg m = {0};
    msg_set(&m, 0, "cmd", "init");
    msg_set(&m, 1, "pmi_version", "1");
    msg_set(&m, 2, "pmi_subversion", "1");
    cohort_status st = pmi1_call(p, &m, "response_to_init");
    char kvs[COH_PMI_VAL_MAX + 1] = "";
    if (st == COHORT_OK) {
        memset(&m, 0, sizeof m);
        msg_set(&m, 0, "cmd", "get_my_kvsname");
        st = pmi1_call(p, &m, "my_kvsname");
        const char *k = st == COHORT_OK ? coh_pmi_get(&m, "kvsname") : NULL;
        if (st == COHORT_OK && (!k || !coh_pmi_value_ok(k)))
            st = coh_err_set(NULL, COHORT_ERR_INVALID,
                             "MPICH's launcher gave no usable kvsname");
        if (st == COHORT_OK)
            snprintf(kvs, sizeof kvs, "%s", k);
    }
    if (st == COHORT_OK && rank == 0) {
        /* Hydra names each node's proxy host here: rank 0's host as the
         * launcher reached it. */
        const char *host = coh_env_str("MPIR_CVAR_CH3_INTERFACE_HOSTNAME");
        char hn[256] = "";
        if (!host || !coh_pmi_value_ok(host)) {
            gethostname(hn, sizeof hn - 1);
            host = hn;
        }
        if (!coh_pmi_value_ok(host) || strlen(host) >= sizeof out->master)
            st = coh_err_set(NULL, COHORT_ERR_INVALID,
                             "rank 0's host name '%.100s' cannot travel through PMI", host);
        if (st == COHORT_OK) {
            snprintf(out->master, sizeof out->master, "%s", host);
            st = pmi1_put(p, kvs, "cohort-master", out->master);
        }
        if (st == COHORT_OK && want_token) {
            make_token(out->token, sizeof out->token, &st);
            if (st == COHORT_OK)
                st = pmi1_put(p, kvs, "cohort-token", out->token);
        }
    }
    if (st == COHORT_OK) {
        memset(&m, 0, sizeof m);
        msg_set(&m, 0, "cmd", "barrier_in");
        st = pmi1_call(p, &m, "barrier_out");
    }
    if (st == COHORT_OK && rank != 0) {
        st = pmi1_get(p, kvs, "cohort-master", out->master, sizeof out->master);
        if (st == COHORT_OK && want_token)
            st = pmi1_get(p, kvs, "cohort-token", out->token, sizeof out->token);
    }
    if (st == COHORT_OK) {
        /* Hydra kills a job whose rank leaves between init and finalize;
         * after the ack it closes its end. */
        memset(&m, 0, sizeof m);
        msg_set(&m, 0, "cmd", "finalize");
        st = pmi1_call(p, &m, "finalize_ack");
        if (st == COHORT_OK)
            close(p->fd);
    }
    if (st == COHORT_OK) {
        /* the job key: "kvs_<mpiexec pid>_<n>_<random>_<host>" */
        snprintf(out->job, sizeof out->job, "%s", kvs);
        out->via = "PMI-1";
    }
    explicit_bzero(p, sizeof *p);
    free(p);
    return st;
}

/* ---- once per process ---- */

static pthread_mutex_t once_mu = PTHREAD_MUTEX_INITIALIZER;
static int once_done, once_token;
static coh_pmi_result once;

cohort_status coh_pmi_exchange(int rank, int size, int want_token, int timeout_ms,
                               coh_pmi_result *out)
{
    (void)rank;
    (void)size;
    pthread_mutex_lock(&once_mu);
    cohort_status st = COHORT_OK;
    if (!once_done) {
        memset(&once, 0, sizeof once);
        if (use_pmix() && pmix_open())
            st = pmix_exchange(want_token, timeout_ms, &once);
        else
            st = pmi1_exchange(want_token, timeout_ms, &once);
        once_done = st == COHORT_OK;
        once_token = want_token;
    }
    if (st == COHORT_OK && want_token && !once_token)
        st = coh_err_set(NULL, COHORT_ERR_INVALID,
                         "the launcher's PMI was used by an earlier cohort_init without a token "
                         "exchange; it can be used once per process: export COHORT_TOKEN");
    if (st == COHORT_OK)
        *out = once;
    pthread_mutex_unlock(&once_mu);
    return st;
}
