/*
 * layer.c - the layer's life: bootstrap inside MPI_Init / MPI_Init_thread
 * (MPI itself agrees on the store address and a fresh job secret), the
 * communicator registry, call sites, the end of a failed job, teardown in
 * MPI_Finalize.
 *
 * Bootstrap: rank 0 starts a cohort store server (port 0, a random job id
 * and token from getrandom) and broadcasts "address, job, token" over a
 * private duplicate of MPI_COMM_WORLD; every rank then joins a cohort world
 * group through it and starts a checker on it. Nothing to configure; a
 * program that never calls MPI_Init is untouched. If the bootstrap fails the
 * program runs unchecked, with one warning per rank.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "layer.h"

cohort_check *cm_chk;
int cm_world_rank = -1;

static cohort_group *world;
static cohort_store_server *server;
static MPI_Comm priv = MPI_COMM_NULL;
static int keyval = MPI_KEYVAL_INVALID;
static MPI_Errhandler cm_errh = MPI_ERRHANDLER_NULL; /* the layer's (errfn) */
static _Atomic int fatal_once;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized_here;

/* ---- ending a failed job ---- */

static int exit_code(int kind)
{
    switch (kind) {
    case COHORT_CHECK_MISMATCH: return CM_EXIT_MISMATCH;
    case COHORT_CHECK_TIMEOUT: return CM_EXIT_TIMEOUT;
    case COHORT_CHECK_DEADLOCK: return CM_EXIT_DEADLOCK;
    default: return CM_EXIT_ABORTED;
    }
}

static void report(int kind, const char *text)
{
    fprintf(stderr, "cohort-mpi: rank %d: %s%s\n", cm_world_rank,
            kind == COHORT_CHECK_STALL ? "" : "error: ", text);
    fflush(stderr);
}

void cm_fatal(int kind, const char *text)
{
    if (atomic_exchange(&fatal_once, 1)) {
        /* Another thread is ending the job. */
        for (;;)
            pause();
    }
    if (text) {
        report(kind, text);
    } else {
        /* Every rank has printed the report (the checker waited for that),
         * but a launcher forwards ranks' output asynchronously: MPICH's
         * hydra, torn down by MPI_Abort, can drop a line still in a rank's
         * pipe (suspected: once in a full-suite run one rank's report was
         * missing from mpiexec's output). Give the forwarding a moment;
         * this is the failure path only. */
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    PMPI_Abort(MPI_COMM_WORLD, exit_code(kind));
    _exit(exit_code(kind));
}

/* A checker call returned a failure: the report was handed to the handler
 * already (printed) and every rank has it; end the job. */
void cm_failed(cohort_status st)
{
    int kind = st == COHORT_ERR_CONTRACT   ? COHORT_CHECK_MISMATCH
               : st == COHORT_ERR_TIMEOUT ? COHORT_CHECK_TIMEOUT
                                           : COHORT_CHECK_ABORTED;
    cm_fatal(kind, NULL);
}

/* The checker failed (maybe on another rank): its monitor ends the job once
 * every rank has the report. Wait for that, bounded. */
static void wait_for_fatal(void)
{
    for (int i = 0; i < 1500; i++) {
        if (atomic_load(&fatal_once))
            for (;;)
                pause();
        usleep(10 * 1000);
    }
    cm_fatal(COHORT_CHECK_ABORTED, "the checker failed but did not end the job within 15 s");
}

static void on_event(void *arg, const cohort_check_event *ev)
{
    (void)arg;
    report(ev->kind, ev->text);
}

static void on_abort(void *arg, const cohort_check_event *ev)
{
    (void)arg;
    cm_fatal(ev->kind, NULL);
}

/* ---- call sites: return address -> file:line ---- */

/* dladdr names the object; addr2line (binutils) turns the offset into
 * file:line where the object has debug info, else "function (object)". Runs
 * only while a report or a stall message is built. */
static int resolve_now(const void *pc, char *out, size_t len);

/* Resolutions are cached: each distinct call site costs one addr2line run
 * per process (a fork), however often it is reported. */
typedef struct site_cache {
    const void *pc;
    char text[160];
    int ok;
} site_cache;
static site_cache sites[256];
static pthread_mutex_t site_mu = PTHREAD_MUTEX_INITIALIZER;

static int resolve(void *arg, const void *pc, char *out, size_t len)
{
    (void)arg;
    size_t i = ((uintptr_t)pc >> 2) % (sizeof sites / sizeof sites[0]);
    pthread_mutex_lock(&site_mu);
    if (pc && sites[i].pc == pc) {
        snprintf(out, len, "%s", sites[i].text);
        int ok = sites[i].ok;
        pthread_mutex_unlock(&site_mu);
        return ok;
    }
    pthread_mutex_unlock(&site_mu);
    char text[160] = "";
    int ok = resolve_now(pc, text, sizeof text);
    pthread_mutex_lock(&site_mu);
    sites[i].pc = pc;
    snprintf(sites[i].text, sizeof sites[i].text, "%s", text);
    sites[i].ok = ok;
    pthread_mutex_unlock(&site_mu);
    snprintf(out, len, "%s", text);
    return ok;
}

static int resolve_now(const void *pc, char *out, size_t len)
{
    Dl_info di;
    if (!pc || !dladdr(pc, &di) || !di.dli_fname)
        return 0;
    uintptr_t off = (uintptr_t)pc - (uintptr_t)di.dli_fbase;
    /* The executable may be non-PIE: then addresses are absolute. */
    char exe[512];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[el > 0 ? el : 0] = 0;
    const char *obj = di.dli_fname[0] ? di.dli_fname : exe;
    if (di.dli_fbase == NULL || ((uintptr_t)di.dli_fbase < 0x400000 + 1 && !strcmp(obj, exe)))
        off = (uintptr_t)pc;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "addr2line -e '%s' -f -C 0x%lx 2>/dev/null", obj,
             (unsigned long)(off - 1));
    if (strchr(obj, '\''))
        return 0;
    FILE *p = popen(cmd, "r");
    char fn[512] = "", fl[512] = "";
    if (p) {
        if (!fgets(fn, sizeof fn, p))
            fn[0] = 0;
        if (!fgets(fl, sizeof fl, p))
            fl[0] = 0;
        pclose(p);
    }
    fn[strcspn(fn, "\n")] = 0;
    fl[strcspn(fl, "\n ")] = 0;
    if (fl[0] && fl[0] != '?') {
        const char *base = strrchr(fl, '/');
        snprintf(out, len, "%s", base ? base + 1 : fl);
        return 1;
    }
    const char *ob = strrchr(obj, '/');
    if (di.dli_sname)
        snprintf(out, len, "%s+0x%lx (%s)", di.dli_sname,
                 (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_saddr), ob ? ob + 1 : obj);
    else if (fn[0] && fn[0] != '?')
        snprintf(out, len, "%s (%s)", fn, ob ? ob + 1 : obj);
    else
        snprintf(out, len, "%s+0x%lx", ob ? ob + 1 : obj, (unsigned long)off);
    return 1;
}

int cm_resolve_site(const void *pc, char *out, size_t len)
{
    return resolve(NULL, pc, out, len);
}

/* ---- communicators ---- */

/* The last lookup per thread, valid while no communicator was freed since
 * (a freed handle may come back for another communicator). */
static _Atomic unsigned long comm_gen = 1;
static CM_TLS MPI_Comm tl_comm;
static CM_TLS cm_comm *tl_cc;
static CM_TLS unsigned long tl_gen;

static int del_attr(MPI_Comm comm, int kv, void *val, void *extra)
{
    (void)comm, (void)kv, (void)extra;
    atomic_fetch_add(&comm_gen, 1);
    cm_comm *cc = val;
    if (cc && cc != (cm_comm *)&keyval) {
        if (cm_chk)
            cohort_check_group_remove(cm_chk, cc->grp);
        free(cc->world);
        free(cc);
    }
    return MPI_SUCCESS;
}

static int world_ranks(MPI_Comm comm, int **out, int *n)
{
    MPI_Group g, wg;
    if (PMPI_Comm_size(comm, n) != MPI_SUCCESS || PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return -1;
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *in = malloc(sizeof(int) * (size_t)*n), *w = malloc(sizeof(int) * (size_t)*n);
    if (!in || !w) {
        free(in), free(w);
        PMPI_Group_free(&g), PMPI_Group_free(&wg);
        return -1;
    }
    for (int i = 0; i < *n; i++)
        in[i] = i;
    PMPI_Group_translate_ranks(g, *n, in, wg, w);
    free(in);
    PMPI_Group_free(&g), PMPI_Group_free(&wg);
    for (int i = 0; i < *n; i++)
        if (w[i] == MPI_UNDEFINED) {
            free(w);
            return -1; /* a member outside MPI_COMM_WORLD (dynamic processes) */
        }
    *out = w;
    return 0;
}

static cm_comm *register_comm(MPI_Comm comm, uint64_t id, const char *name)
{
    int n, *w;
    if (world_ranks(comm, &w, &n) != 0)
        return NULL;
    cm_comm *cc = calloc(1, sizeof *cc);
    if (!cc) {
        free(w);
        return NULL;
    }
    if (!id)
        id = cohort_check_group_id(0, 0, w, n);
    cc->n = n, cc->world = w, cc->id = id;
    snprintf(cc->name, sizeof cc->name, "%s", name);
    if (cohort_check_group_add(cm_chk, id, w, n, &cc->grp) != COHORT_OK) {
        fprintf(stderr, "cohort-mpi: rank %d: %s is not checked: %s\n", cm_world_rank, name,
                cohort_last_error(NULL));
        free(w), free(cc);
        return NULL;
    }
    cohort_check_group_name(cm_chk, cc->grp, name);
    PMPI_Comm_set_attr(comm, keyval, cc);
    /* A communicator inherits its parent's handler: the layer's stands for
     * the default (fatal) and is installed where the default is. */
    MPI_Errhandler cur = MPI_ERRHANDLER_NULL;
    PMPI_Comm_get_errhandler(comm, &cur);
    if (cm_errh != MPI_ERRHANDLER_NULL && (cur == cm_errh || cur == MPI_ERRORS_ARE_FATAL)) {
        if (cur != cm_errh)
            PMPI_Comm_set_errhandler(comm, cm_errh);
        cc->own_eh = 1;
    }
    if (cur != MPI_ERRHANDLER_NULL)
        PMPI_Errhandler_free(&cur); /* get returned a new reference */
    return cc;
}

/* Communicators made by calls the layer does not intercept (e.g.
 * MPI_Comm_create_group, collective over the new members only): named by
 * their member list and how many such communicators with the same members
 * this rank registered before - the same on every member as long as they
 * first use them in the same order. */
typedef struct lazy {
    uint64_t members;
    uint64_t count;
} lazy;
static lazy *lazies;
static size_t n_lazy;
static uint64_t n_comms;

static cm_comm *comm_lookup(MPI_Comm comm);

cm_comm *cm_comm_get(MPI_Comm comm)
{
    if (!cm_chk || comm == MPI_COMM_NULL)
        return NULL;
    unsigned long gen = atomic_load_explicit(&comm_gen, memory_order_acquire);
    if (tl_gen == gen && tl_comm == comm)
        return tl_cc;
    cm_comm *cc = comm_lookup(comm);
    tl_comm = comm, tl_cc = cc, tl_gen = gen;
    return cc;
}

static cm_comm *comm_lookup(MPI_Comm comm)
{
    void *val = NULL;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, keyval, &val, &flag) != MPI_SUCCESS)
        return NULL;
    if (flag)
        return val == (void *)&keyval ? NULL : val;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    int n, *w;
    if (inter || world_ranks(comm, &w, &n) != 0) {
        PMPI_Comm_set_attr(comm, keyval, (void *)&keyval); /* unchecked */
        return NULL;
    }
    uint64_t mh = cohort_check_group_id(0x6c617a79, 0, w, n);
    free(w);
    pthread_mutex_lock(&reg_mu);
    uint64_t k = 0;
    size_t i;
    for (i = 0; i < n_lazy && lazies[i].members != mh; i++)
        ;
    if (i == n_lazy) {
        lazy *nl = realloc(lazies, (n_lazy + 1) * sizeof *nl);
        if (nl) {
            lazies = nl;
            lazies[n_lazy++] = (lazy){mh, 0};
        }
    }
    if (i < n_lazy)
        k = ++lazies[i].count;
    uint64_t num = ++n_comms;
    pthread_mutex_unlock(&reg_mu);
    char name[64];
    snprintf(name, sizeof name, "comm %" PRIu64 " (made by a call the layer does not see)", num);
    return register_comm(comm, cohort_check_group_id(mh, k, NULL, 0), name);
}

void cm_comm_made(cm_comm *parent, MPI_Comm newcomm, const char *how)
{
    if (!parent)
        return;
    /* Every member of the parent counts the call, whether or not it is in
     * a new communicator (MPI_UNDEFINED colour), so the counters agree. */
    uint64_t child = ++parent->children;
    if (newcomm == MPI_COMM_NULL)
        return;
    int inter = 0;
    PMPI_Comm_test_inter(newcomm, &inter);
    if (inter)
        return;
    int n, *w;
    if (world_ranks(newcomm, &w, &n) != 0)
        return;
    uint64_t id = cohort_check_group_id(parent->id, child, w, n);
    free(w);
    pthread_mutex_lock(&reg_mu);
    uint64_t num = ++n_comms;
    pthread_mutex_unlock(&reg_mu);
    char name[64];
    snprintf(name, sizeof name, "comm %" PRIu64 " (%s of %.20s)", num, how, parent->name);
    register_comm(newcomm, id, name);
}

/* ---- MPI errors ----
 *
 * A mismatched collective often makes the backend fail (MPI_ERR_TRUNCATE)
 * before the comparison has run, and MPI_ERRORS_ARE_FATAL would end the
 * job with that symptom instead of the cause. The layer's handler stays
 * installed on every communicator; on an error it first lets the check
 * speak (the call's own comparison, then up to 2 s for another rank's
 * finding), then applies the program's handler: fatal as MPI does, return,
 * or the program's own function. */

static MPI_Comm fatal_comm = MPI_COMM_NULL; /* keeps the default handler, for get */

/* Runs only where the layer's handler stands for MPI_ERRORS_ARE_FATAL. */
static void errfn(MPI_Comm *comm, int *code, ...)
{
    if (cm_chk) {
        cm_comm *cur = cm_cur.comm;
        if (cur) {
            cohort_status st = cohort_check_wait(cm_chk, cur->grp, cm_cur.seq, 5000);
            if (st != COHORT_OK && st != COHORT_ERR_TIMEOUT)
                cm_failed(st);
        }
        for (int i = 0; i < 200 && cohort_check_status(cm_chk) == COHORT_OK; i++)
            usleep(10 * 1000);
        if (cohort_check_status(cm_chk) != COHORT_OK)
            wait_for_fatal();
    }
    char msg[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    PMPI_Error_string(*code, msg, &len);
    fprintf(stderr, "cohort-mpi: rank %d: MPI error (MPI_ERRORS_ARE_FATAL): %s\n", cm_world_rank,
            msg);
    fflush(stderr);
    PMPI_Abort(*comm, *code);
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler eh)
{
    cm_comm *cc = cm_comm_get(comm);
    if (cc && cm_errh != MPI_ERRHANDLER_NULL && eh == MPI_ERRORS_ARE_FATAL) {
        int rc = PMPI_Comm_set_errhandler(comm, cm_errh);
        if (rc == MPI_SUCCESS)
            cc->own_eh = 1;
        return rc;
    }
    int rc = PMPI_Comm_set_errhandler(comm, eh);
    if (cc && rc == MPI_SUCCESS)
        cc->own_eh = 0;
    return rc;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *eh)
{
    cm_comm *cc = cm_comm_get(comm);
    if (cc && cc->own_eh && fatal_comm != MPI_COMM_NULL)
        return PMPI_Comm_get_errhandler(fatal_comm, eh); /* a counted MPI_ERRORS_ARE_FATAL */
    return PMPI_Comm_get_errhandler(comm, eh);
}

/* ---- bootstrap ---- */

typedef struct boot {
    int32_t ok;
    char addr[128];
    char job[64];
    char token[72];
    char why[256];
} boot;

static void hexrand(char *out, size_t nbytes)
{
    unsigned char b[32];
    if (nbytes > sizeof b)
        nbytes = sizeof b;
    if (getrandom(b, nbytes, 0) != (ssize_t)nbytes)
        memset(b, 0, sizeof b); /* reported below as a bootstrap failure */
    for (size_t i = 0; i < nbytes; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* An IPv4 address other hosts can reach (the first up, non-loopback
 * interface), or COHORT_MPI_STORE_ADDR. */
static int pick_addr(char *out, size_t len)
{
    const char *e = getenv("COHORT_MPI_STORE_ADDR");
    if (e && *e) {
        snprintf(out, len, "%s", e);
        return 0;
    }
    struct ifaddrs *ifa, *p;
    if (getifaddrs(&ifa) != 0)
        return -1;
    int found = -1;
    for (p = ifa; p && found; p = p->ifa_next)
        if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET && (p->ifa_flags & IFF_UP) &&
            !(p->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, out,
                      (socklen_t)len);
            found = 0;
        }
    freeifaddrs(ifa);
    return found;
}

/* COHORT_MPI=off on every rank: 1. A launcher can set it per rank (an
 * MPMD line, a wrapper script), and a rank that skipped the bootstrap's
 * collectives left the others in them: 3 ranks, off on one, hung without
 * a line until killed (session 38). So every rank says what it wants
 * first, in collectives all of them run; where they differ the check is
 * off for the whole job (what some rank asked for) and rank 0 names the
 * ranks. */
static int job_wants_off(int rank, int size)
{
    (void)size;
    const char *v = getenv("COHORT_MPI");
    int off = v && (!strcmp(v, "off") || !strcmp(v, "0"));
    /* the same two collectives on every rank, whatever it wants or could
     * allocate: the lowest rank off, the lowest on, the highest off (as
     * its negative), then how many are off */
    int m[3] = {off ? rank : INT_MAX, off ? INT_MAX : rank, off ? -rank : INT_MAX}, n_off = 0;
    PMPI_Allreduce(MPI_IN_PLACE, m, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(&off, &n_off, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (n_off && m[1] != INT_MAX && rank == 0) {
        char which[64];
        if (n_off == 1)
            snprintf(which, sizeof which, "rank %d", m[0]);
        else
            snprintf(which, sizeof which, "%d ranks (%d to %d)", n_off, m[0], -m[2]);
        fprintf(stderr,
                "cohort-mpi: rank 0: the check is off for this job: COHORT_MPI=off on %s but not "
                "on rank %d (set it for the whole job, not per rank)\n",
                which, m[1]);
    }
    return n_off > 0;
}

static void bootstrap(void)
{
    int rank, size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (job_wants_off(rank, size))
        return;
    /* cohort's own log lines would repeat the layer's reports in another
     * form: off unless asked for. */
    setenv("COHORT_LOG", "off", 0);
    cm_world_rank = rank;
    PMPI_Comm_dup(MPI_COMM_WORLD, &priv);
    PMPI_Comm_set_name(priv, "cohort-mpi bootstrap");
    /* One host or several? (one small collective, at init only) */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t hh = cohort_check_group_id(0, 0, NULL, 0);
    for (const char *c = host; *c; c++)
        hh = (hh ^ (unsigned char)*c) * 0x100000001b3ull;
    uint64_t lo = hh, hi = hh;
    PMPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, priv);
    PMPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, priv);
    int one_host = lo == hi;

    boot b;
    memset(&b, 0, sizeof b);
    if (rank == 0) {
        char ip[96] = "127.0.0.1";
        if (!one_host && pick_addr(ip, sizeof ip) != 0)
            snprintf(b.why, sizeof b.why, "no network interface for the store (set COHORT_MPI_STORE_ADDR)");
        snprintf(b.job, sizeof b.job, "mpi-");
        hexrand(b.job + 4, 8);
        hexrand(b.token, 32);
        const char *jid = b.job, *tok = b.token;
        cohort_store_server_opts so;
        memset(&so, 0, sizeof so);
        so.bind_addr = one_host ? "127.0.0.1" : "0.0.0.0";
        so.port = 0;
        so.job_ids = &jid;
        so.tokens = &tok;
        so.n_jobs = 1;
        if (!b.why[0]) {
            if (cohort_store_server_start(&server, &so) != COHORT_OK)
                snprintf(b.why, sizeof b.why, "starting the store: %s", cohort_last_error(NULL));
            else {
                snprintf(b.addr, sizeof b.addr, "tcp://%s:%d", ip,
                         cohort_store_server_port(server));
                b.ok = 1;
            }
        }
    }
    PMPI_Bcast(&b, (int)sizeof b, MPI_BYTE, 0, priv);
    int ok = b.ok;
    cohort_status st = COHORT_OK;
    if (ok) {
        cohort_options o;
        cohort_options_init(&o);
        o.rank = rank;
        o.world_size = size;
        o.store_url = b.addr;
        o.job_id = b.job;
        o.token = b.token;
        st = cohort_init_opts(&world, &o);
        if (st == COHORT_OK) {
            cohort_check_options co;
            cohort_check_options_init(&co);
            co.handler = on_event;
            co.abort = on_abort;
            co.resolver = resolve;
            st = cohort_check_create(world, &co, &cm_chk);
        }
    }
    memset(b.token, 0, sizeof b.token);
    /* Everyone on, or everyone off: a rank checking alone would wait for
     * neighbours that never publish. */
    int mine = ok && st == COHORT_OK, all = 0;
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, priv);
    if (!all) {
        if (rank == 0 || !mine)
            fprintf(stderr, "cohort-mpi: rank %d: the check is off for this job: %s\n", rank,
                    !ok ? b.why : st != COHORT_OK ? cohort_last_error(NULL)
                                                  : "another rank could not start it");
        cohort_check_destroy(cm_chk);
        cm_chk = NULL;
        if (world)
            cohort_abort(world, "cohort-mpi bootstrap failed");
        cohort_finalize(world);
        world = NULL;
        PMPI_Barrier(priv);
        if (server)
            cohort_store_server_stop(server);
        server = NULL;
        return;
    }
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_attr, &keyval, NULL);
    PMPI_Comm_dup(MPI_COMM_SELF, &fatal_comm);
    PMPI_Comm_set_errhandler(fatal_comm, MPI_ERRORS_ARE_FATAL);
    PMPI_Comm_create_errhandler(errfn, &cm_errh);
    register_comm(MPI_COMM_WORLD, 0, "MPI_COMM_WORLD");
    initialized_here = 1;
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        bootstrap();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        bootstrap();
    return rc;
}

int MPI_Finalize(void)
{
    if (cm_chk) {
        cm_comm *cw = cm_comm_get(MPI_COMM_WORLD);
        /* MPI_Finalize is collective: the last check compares it with the
         * neighbour's (an extra or a missing call before it shows), then
         * every rank meets the others or learns of a failure. */
        if (cw) {
            cohort_check_fp fp;
            memset(&fp, 0, sizeof fp);
            fp.op = "MPI_Finalize";
            fp.root = -1;
            fp.pc = CM_PC();
            uint64_t seq;
            cohort_status st = cohort_check_begin(cm_chk, cw->grp, &fp, &seq);
            if (st != COHORT_OK)
                cm_failed(st);
        }
        cohort_status st = cohort_check_close(cm_chk, -1);
        if (st != COHORT_OK) {
            if (cohort_check_status(cm_chk) != COHORT_OK)
                cm_failed(cohort_check_status(cm_chk));
            cm_fatal(COHORT_CHECK_ABORTED, cohort_last_error(NULL));
        }
        const char *stats = getenv("COHORT_MPI_STATS");
        const char *stats_file = getenv("COHORT_MPI_STATS_FILE");
        if (stats_file && !*stats_file)
            stats_file = NULL;
        if (stats_file || (stats && strcmp(stats, "0"))) {
            cohort_check_stats s;
            cohort_check_get_stats(cm_chk, &s);
            char line[300];
            int l = snprintf(line, sizeof line,
                             "cohort-mpi: rank %d: stats: %" PRIu64 " calls checked, %" PRIu64
                             " compared with the neighbour (%" PRIu64
                             " after the call returned, %" PRIu64 " waits; %" PRIu64
                             " begin/end without a mutex), %s\n",
                             cm_world_rank, s.calls, s.compared, s.lazy, s.sync_waits, s.unlocked,
                             s.compared == s.calls ? "all compared" : "NOT all compared");
            /* To a file: appended, one write per line, so ranks do not
             * interleave (harnesses such as MPICH's runtests fail a test
             * on any output but their own). */
            int fd = stats_file ? open(stats_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)
                                : STDERR_FILENO;
            if (fd < 0 || write(fd, line, (size_t)l) != l)
                fprintf(stderr, "cohort-mpi: rank %d: COHORT_MPI_STATS_FILE %s: %s\n",
                        cm_world_rank, stats_file, strerror(errno));
            if (fd >= 0 && fd != STDERR_FILENO)
                close(fd);
        }
        cm_selftime_report();
        PMPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
        atomic_fetch_add(&comm_gen, 1);
        cohort_check *c = cm_chk;
        cm_chk = NULL;
        cohort_check_destroy(c);
        cohort_finalize(world);
        world = NULL;
        /* The store lives in rank 0: it goes once everybody left the group. */
        PMPI_Barrier(priv);
        if (server)
            cohort_store_server_stop(server);
        server = NULL;
    }
    if (priv != MPI_COMM_NULL)
        PMPI_Comm_free(&priv);
    if (keyval != MPI_KEYVAL_INVALID)
        PMPI_Comm_free_keyval(&keyval);
    if (cm_errh != MPI_ERRHANDLER_NULL) {
        /* Communicators that still hold it keep their own reference. */
        MPI_Errhandler cur = MPI_ERRHANDLER_NULL;
        PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &cur);
        if (cur == cm_errh)
            PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        if (cur != MPI_ERRHANDLER_NULL)
            PMPI_Errhandler_free(&cur);
        PMPI_Errhandler_free(&cm_errh);
    }
    if (fatal_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&fatal_comm);
    return PMPI_Finalize();
}

/* ---- calls that make communicators (collective over the parent) ---- */

/* Announces the making call on the parent (its own fingerprint: the
 * operation and what must agree), runs it, registers the result. */
#define MAKE_COMM(opname, how, args_h, args_t, call, newcomm_expr)                                \
    do {                                                                                           \
        cm_comm *cc = cm_comm_get(comm);                                                          \
        if (!cc)                                                                                   \
            return call;                                                                           \
        cohort_check_fp fp;                                                                        \
        memset(&fp, 0, sizeof fp);                                                                 \
        fp.op = opname;                                                                            \
        fp.root = -1;                                                                              \
        fp.args_hash = (args_h);                                                                   \
        fp.args = (args_t);                                                                        \
        fp.pc = CM_PC();                                                                           \
        uint64_t seq;                                                                              \
        cohort_status st = cohort_check_begin(cm_chk, cc->grp, &fp, &seq);                        \
        if (st != COHORT_OK)                                                                       \
            cm_failed(st);                                                                         \
        int rc = call;                                                                             \
        st = cohort_check_end(cm_chk, cc->grp, seq, 0);                                            \
        if (st != COHORT_OK)                                                                       \
            cm_failed(st);                                                                         \
        if (rc == MPI_SUCCESS)                                                                     \
            cm_comm_made(cc, (newcomm_expr), how);                                                 \
        return rc;                                                                                 \
    } while (0)

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Comm_dup", "dup", 0, NULL, PMPI_Comm_dup(comm, newcomm), *newcomm);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Comm_dup_with_info", "dup", 0, NULL,
              PMPI_Comm_dup_with_info(comm, info, newcomm), *newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Comm_split", "split", 0, NULL, PMPI_Comm_split(comm, color, key, newcomm),
              *newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Comm_split_type", "split_type", 0, NULL,
              PMPI_Comm_split_type(comm, split_type, key, info, newcomm), *newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    /* MPI allows different (disjoint) groups on different ranks. */
    MAKE_COMM("MPI_Comm_create", "create", 0, NULL, PMPI_Comm_create(comm, group, newcomm),
              *newcomm);
}

static uint64_t ints_hash(uint64_t h, const int *v, int n)
{
    for (int i = 0; i < n; i++)
        h = (h ^ (uint32_t)v[i]) * 0x100000001b3ull;
    return h | 1;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm)
{
    char t[160];
    int p = snprintf(t, sizeof t, "dims");
    for (int i = 0; i < ndims && p < (int)sizeof t - 24; i++)
        p += snprintf(t + p, sizeof t - (size_t)p, "%s%d%s", i ? "x" : " ", dims[i],
                      periods[i] ? "p" : "");
    uint64_t h = ints_hash(ints_hash((uint64_t)ndims * 31 + (uint64_t)reorder, dims, ndims),
                           periods, ndims);
    MAKE_COMM("MPI_Cart_create", "cart", h, t,
              PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm), *newcomm);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Cart_sub", "cart_sub", 0, NULL, PMPI_Cart_sub(comm, remain_dims, newcomm),
              *newcomm);
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[],
                     int reorder, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Graph_create", "graph", 0, NULL,
              PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm), *newcomm);
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Dist_graph_create_adjacent", "dist_graph", 0, NULL,
              PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                              destinations, destweights, info, reorder, newcomm),
              *newcomm);
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm *newcomm)
{
    MAKE_COMM("MPI_Dist_graph_create", "dist_graph", 0, NULL,
              PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                     reorder, newcomm),
              *newcomm);
}

int MPI_Type_free(MPI_Datatype *datatype)
{
    if (datatype)
        cm_type_forget(*datatype);
    return PMPI_Type_free(datatype);
}
