/*
 * coll.c - the collectives: each wrapper builds the call's fingerprint from
 * what MPI requires to agree on every member, announces it, calls PMPI, and
 * has it compared (docs/mpi.md lists the fields per operation).
 *
 *  - type signature: the datatype's unit and count x multiplicity (types.c);
 *  - reduce op by name; root as given (a rank of the communicator);
 *  - arguments every rank knows and must agree on, hashed (the receive
 *    counts of Allgatherv and Reduce_scatter);
 *  - what only this rank can check (a root receiving other amounts than it
 *    sends itself, send and receive amounts of Allgather) fails at once
 *    through cohort_check_fail_local.
 * Blocking calls that synchronise every member are compared right after
 * PMPI returns (COHORT_CHECK_SYNCED); the others, and the nonblocking forms
 * (checked at the call, in call order), compare lazily. When PMPI returns
 * an error, the comparison is awaited (bounded) first: a mismatch is the
 * better explanation of the error.
 */
#include <stdio.h>
#include <string.h>

#include "layer.h"

#define ERR_WAIT_MS 5000

static void fp_init(cohort_check_fp *fp, const char *op, const void *pc)
{
    memset(fp, 0, sizeof *fp);
    fp->op = op;
    fp->root = -1;
    fp->pc = pc;
}

static void typed(cohort_check_fp *fp, int count, MPI_Datatype dt)
{
    cm_sig s;
    cm_type_sig(dt, &s);
    fp->count = (uint64_t)(count < 0 ? 0 : count) * s.m;
    /* An empty message matches an empty one whatever the datatypes. */
    fp->sig_hash = fp->count ? s.hash : 0;
    fp->sig = fp->count ? s.text : NULL;
}

static uint64_t amount(int count, MPI_Datatype dt, cm_sig *s)
{
    cm_type_sig(dt, s);
    return (uint64_t)(count < 0 ? 0 : count) * s->m;
}

static int my_index(const cm_comm *cc)
{
    for (int i = 0; i < cc->n; i++)
        if (cc->world[i] == cm_world_rank)
            return i;
    return -1;
}

/* The counts vector (in signature units) as args: hash + readable text. */
static void counts_args(cohort_check_fp *fp, const int *counts, int n, uint64_t m, char *text,
                        size_t tlen, const char *label)
{
    uint64_t h = 0xcbf29ce484222325ull, sum = 0;
    int p = snprintf(text, tlen, "%s ", label);
    for (int i = 0; i < n; i++) {
        uint64_t v = (uint64_t)(counts[i] < 0 ? 0 : counts[i]) * m;
        sum += v;
        h = (h ^ v) * 0x100000001b3ull;
        if (p < (int)tlen - 24)
            p += snprintf(text + p, tlen - (size_t)p, "%s%llu", i ? "," : "", (unsigned long long)v);
        else if (p < (int)tlen - 4) {
            p += snprintf(text + p, tlen - (size_t)p, "...");
        }
    }
    fp->args_hash = h | 1;
    fp->args = text;
    fp->count = sum;
}

/* Announces the call; returns its number. A failure (an earlier mismatch
 * found, or this one found before the backend is entered) ends the job. */
CM_TLS cm_cur_call cm_cur;

#ifdef COHORT_MPI_SELFTIME
/* A profiling build: per call, (entry -> PMPI) + (PMPI's return -> exit),
 * in a histogram of ticks - the TSC on x86-64, else the monotonic clock in
 * ns - converted to ns at the report with a calibration from the first call
 * to the report (a short run still reports; calibrating in the first 50 ms
 * of calls, as before, left runs shorter than that without a report). */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#define ST_MAX_TICKS (1u << 18)
static _Atomic uint64_t st_hist[ST_MAX_TICKS + 1];
static uint64_t st_cal_tick, st_cal_ns;

static uint64_t st_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t st_now(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    return st_mono_ns();
#endif
}

static void st_add(uint64_t ticks)
{
    if (!st_cal_tick)
        st_cal_tick = st_now(), st_cal_ns = st_mono_ns();
    atomic_fetch_add_explicit(&st_hist[ticks < ST_MAX_TICKS ? ticks : ST_MAX_TICKS], 1,
                              memory_order_relaxed);
}

void cm_selftime_report(void)
{
    uint64_t n = 0, seen = 0;
    for (size_t i = 0; i <= ST_MAX_TICKS; i++)
        n += st_hist[i];
    if (!n)
        return;
    uint64_t dt = st_now() - st_cal_tick, dns = st_mono_ns() - st_cal_ns;
#if defined(__x86_64__)
    double ns_per_tick = dt ? (double)dns / (double)dt : 0;
#else
    double ns_per_tick = 1;
    (void)dt, (void)dns;
#endif
    const double qs[] = {0.1, 0.5, 0.9, 0.99};
    uint64_t at[4] = {0};
    size_t k = 0;
    for (size_t i = 0; i <= ST_MAX_TICKS && k < 4; i++) {
        seen += st_hist[i];
        while (k < 4 && (double)seen >= qs[k] * (double)n)
            at[k++] = (uint64_t)((double)i * ns_per_tick + 0.5);
    }
    fprintf(stderr,
            "cohort-mpi: rank %d: selftime: %llu calls, the layer's own time per call (outside "
            "PMPI): p10 %llu ns, p50 %llu ns, p90 %llu ns, p99 %llu ns (%.3f ns per tick)\n",
            cm_world_rank, (unsigned long long)n, (unsigned long long)at[0],
            (unsigned long long)at[1], (unsigned long long)at[2], (unsigned long long)at[3],
            ns_per_tick);
}
#define ST_ENTER() (cm_cur.t_enter = st_now())
#define ST_PRE() (cm_cur.t_pre = st_now())
#define ST_POST() uint64_t st_post_ = st_now()
#define ST_LEAVE() st_add((cm_cur.t_pre - cm_cur.t_enter) + (st_now() - st_post_))
#else
void cm_selftime_report(void) {}
#define ST_ENTER() ((void)0)
#define ST_PRE() ((void)0)
#define ST_POST() ((void)0)
#define ST_LEAVE() ((void)0)
#endif

static uint64_t begin(cm_comm *cc, const cohort_check_fp *fp)
{
    uint64_t seq = 0;
    cohort_status st = cohort_check_begin(cm_chk, cc->grp, fp, &seq);
    if (st != COHORT_OK)
        cm_failed(st);
    cm_cur.comm = cc;
    cm_cur.seq = seq;
    ST_PRE();
    return seq;
}

static void end(cm_comm *cc, uint64_t seq, unsigned flags, int rc)
{
    ST_POST();
    cm_cur.comm = NULL;
    cohort_status st;
    if (rc != MPI_SUCCESS)
        st = cohort_check_wait(cm_chk, cc->grp, seq, ERR_WAIT_MS);
    else
        st = cohort_check_end(cm_chk, cc->grp, seq, flags);
    if (st != COHORT_OK && st != COHORT_ERR_TIMEOUT)
        cm_failed(st);
    ST_LEAVE();
}

/* A local inconsistency: the site, then every rank gets the report. */
static void local_fail(cm_comm *cc, const cohort_check_fp *fp, uint64_t seq, const char *what)
{
    char site[200] = "unknown call site", text[900];
    cm_resolve_site(fp->pc, site, sizeof site);
    snprintf(text, sizeof text, "%s #%llu (%s): %s", fp->op, (unsigned long long)seq, site, what);
    cm_failed(cohort_check_fail_local(cm_chk, cc->grp, text));
}

/* ---- the rooted and the symmetric collectives, blocking and not ---- */

#define CHECKED(comm, call)                                                                        \
    ST_ENTER();                                                                                    \
    cm_comm *cc = cm_comm_get(comm);                                                              \
    if (!cc)                                                                                       \
        return call;

int MPI_Barrier(MPI_Comm comm)
{
    CHECKED(comm, PMPI_Barrier(comm));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Barrier", CM_PC());
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Barrier(comm);
    end(cc, seq, COHORT_CHECK_SYNCED, rc);
    return rc;
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Ibarrier(comm, req));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Ibarrier", CM_PC());
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Ibarrier(comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

#define BCAST_FP(name)                                                                             \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    typed(&fp, count, datatype);                                                                   \
    fp.root = root;

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Bcast(buffer, count, datatype, root, comm));
    BCAST_FP("MPI_Bcast");
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Bcast(buffer, count, datatype, root, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *req)
{
    CHECKED(comm, PMPI_Ibcast(buffer, count, datatype, root, comm, req));
    BCAST_FP("MPI_Ibcast");
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

#define REDUCE_FP(name, r)                                                                         \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    typed(&fp, count, datatype);                                                                   \
    fp.redop = cm_op_name(op);                                                                     \
    fp.root = (r);

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm));
    REDUCE_FP("MPI_Reduce", root);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, req));
    REDUCE_FP("MPI_Ireduce", root);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    CHECKED(comm, PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
    REDUCE_FP("MPI_Allreduce", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    end(cc, seq, count > 0 ? COHORT_CHECK_SYNCED : 0, rc);
    return rc;
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, req));
    REDUCE_FP("MPI_Iallreduce", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm)
{
    CHECKED(comm, PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm));
    REDUCE_FP("MPI_Scan", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, req));
    REDUCE_FP("MPI_Iscan", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm)
{
    CHECKED(comm, PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm));
    REDUCE_FP("MPI_Exscan", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, req));
    REDUCE_FP("MPI_Iexscan", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm));
    int count = recvcount;
    REDUCE_FP("MPI_Reduce_scatter_block", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    end(cc, seq, recvcount > 0 ? COHORT_CHECK_SYNCED : 0, rc);
    return rc;
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm,
            PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, req));
    int count = recvcount;
    REDUCE_FP("MPI_Ireduce_scatter_block", -1);
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

#define RSCAT_FP(name)                                                                             \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    cm_sig s;                                                                                      \
    cm_type_sig(datatype, &s);                                                                     \
    fp.sig_hash = s.hash;                                                                          \
    fp.sig = s.text;                                                                               \
    fp.redop = cm_op_name(op);                                                                     \
    char args[200];                                                                                \
    counts_args(&fp, recvcounts, cc->n, s.m, args, sizeof args, "recvcounts");

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm));
    RSCAT_FP("MPI_Reduce_scatter");
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    int me = my_index(cc);
    end(cc, seq, me >= 0 && recvcounts[me] > 0 ? COHORT_CHECK_SYNCED : 0, rc);
    return rc;
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, req));
    RSCAT_FP("MPI_Ireduce_scatter");
    uint64_t seq = begin(cc, &fp);
    int rc = PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

/* ---- gather / scatter: every rank's amount must equal the root's per-rank
 * amount; the root checks its own part locally. ---- */

static void rooted_fp(cm_comm *cc, cohort_check_fp *fp, int root, int is_gather,
                      const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      const void *recvbuf, int recvcount, MPI_Datatype recvtype, char *why,
                      size_t wlen)
{
    int me = my_index(cc);
    fp->root = root;
    why[0] = 0;
    /* The data this rank contributes (gather) or gets (scatter); at the
     * root in place, its side of the root's arguments. */
    int in_place = me == root && (is_gather ? sendbuf == MPI_IN_PLACE : recvbuf == MPI_IN_PLACE);
    if (is_gather)
        in_place ? typed(fp, recvcount, recvtype) : typed(fp, sendcount, sendtype);
    else
        in_place ? typed(fp, sendcount, sendtype) : typed(fp, recvcount, recvtype);
    if (me == root && !in_place) {
        cm_sig a, b;
        uint64_t na = amount(sendcount, sendtype, &a), nb = amount(recvcount, recvtype, &b);
        if (na != nb || (na && a.hash != b.hash))
            snprintf(why, wlen,
                     "the root (rank %d) %s %llu x %s per rank but %s %llu x %s itself - the "
                     "amounts and types must match",
                     me, is_gather ? "receives" : "sends", (unsigned long long)(is_gather ? nb : na),
                     is_gather ? (b.text ? b.text : "none") : (a.text ? a.text : "none"),
                     is_gather ? "sends" : "receives", (unsigned long long)(is_gather ? na : nb),
                     is_gather ? (a.text ? a.text : "none") : (b.text ? b.text : "none"));
    }
}

#define ROOTED(name, is_gather, pcall)                                                             \
    CHECKED(comm, pcall);                                                                          \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    char why[400];                                                                                 \
    rooted_fp(cc, &fp, root, is_gather, sendbuf, sendcount, sendtype, recvbuf, recvcount,         \
              recvtype, why, sizeof why);                                                          \
    uint64_t seq = begin(cc, &fp);                                                                 \
    if (why[0])                                                                                    \
        local_fail(cc, &fp, seq, why);                                                             \
    int rc = pcall;                                                                                \
    end(cc, seq, 0, rc);                                                                           \
    return rc;

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    ROOTED("MPI_Gather", 1,
           PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req)
{
    ROOTED("MPI_Igather", 1,
           PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        req));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    ROOTED("MPI_Scatter", 0,
           PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req)
{
    ROOTED("MPI_Iscatter", 0,
           PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                         req));
}

/* Gatherv / Scatterv: per-rank amounts vary and only the root knows them:
 * the operation and the root are compared, the root checks its own part. */
static void rootedv_fp(cm_comm *cc, cohort_check_fp *fp, int root, int is_gather, int in_place,
                       int mycount, MPI_Datatype mytype, int rootcount, MPI_Datatype roottype,
                       char *why, size_t wlen)
{
    int me = my_index(cc);
    fp->root = root;
    why[0] = 0;
    if (me == root && !in_place) {
        cm_sig a, b;
        uint64_t na = amount(mycount, mytype, &a), nb = amount(rootcount, roottype, &b);
        if (na != nb || (na && a.hash != b.hash))
            snprintf(why, wlen,
                     "the root (rank %d) %s %llu x %s for itself but %s %llu x %s - the amounts "
                     "and types must match",
                     me, is_gather ? "expects" : "sends", (unsigned long long)nb,
                     b.text ? b.text : "none", is_gather ? "sends" : "receives",
                     (unsigned long long)na, a.text ? a.text : "none");
    }
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
    CHECKED(comm, PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                               recvtype, root, comm));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Gatherv", CM_PC());
    char why[400];
    int me = my_index(cc);
    rootedv_fp(cc, &fp, root, 1, sendbuf == MPI_IN_PLACE, sendcount, sendtype,
               me == root ? recvcounts[me] : 0, recvtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          root, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                recvtype, root, comm, req));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Igatherv", CM_PC());
    char why[400];
    int me = my_index(cc);
    rootedv_fp(cc, &fp, root, 1, sendbuf == MPI_IN_PLACE, sendcount, sendtype,
               me == root ? recvcounts[me] : 0, recvtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           root, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                recvtype, root, comm));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Scatterv", CM_PC());
    char why[400];
    int me = my_index(cc);
    rootedv_fp(cc, &fp, root, 0, recvbuf == MPI_IN_PLACE, recvcount, recvtype,
               me == root ? sendcounts[me] : 0, sendtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                           root, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                 recvtype, root, comm, req));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Iscatterv", CM_PC());
    char why[400];
    int me = my_index(cc);
    rootedv_fp(cc, &fp, root, 0, recvbuf == MPI_IN_PLACE, recvcount, recvtype,
               me == root ? sendcounts[me] : 0, sendtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                            root, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

/* ---- all-gather / all-to-all: every rank sends what every rank receives
 * per peer. ---- */

static void sym_fp(cohort_check_fp *fp, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   int recvcount, MPI_Datatype recvtype, char *why, size_t wlen)
{
    why[0] = 0;
    if (sendbuf == MPI_IN_PLACE) {
        typed(fp, recvcount, recvtype);
        return;
    }
    typed(fp, sendcount, sendtype);
    cm_sig a, b;
    uint64_t na = amount(sendcount, sendtype, &a), nb = amount(recvcount, recvtype, &b);
    if (na != nb || (na && a.hash != b.hash))
        snprintf(why, wlen,
                 "this rank sends %llu x %s per rank but receives %llu x %s per rank - the "
                 "amounts and types must match",
                 (unsigned long long)na, a.text ? a.text : "none", (unsigned long long)nb,
                 b.text ? b.text : "none");
}

#define SYM(name, flags, pcall)                                                                    \
    CHECKED(comm, pcall);                                                                          \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    char why[400];                                                                                 \
    sym_fp(&fp, sendbuf, sendcount, sendtype, recvcount, recvtype, why, sizeof why);             \
    uint64_t seq = begin(cc, &fp);                                                                 \
    if (why[0])                                                                                    \
        local_fail(cc, &fp, seq, why);                                                             \
    int rc = pcall;                                                                                \
    end(cc, seq, fp.count > 0 ? (flags) : 0, rc);                                                  \
    return rc;

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    SYM("MPI_Allgather", COHORT_CHECK_SYNCED,
        PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req)
{
    SYM("MPI_Iallgather", 0,
        PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    SYM("MPI_Alltoall", COHORT_CHECK_SYNCED,
        PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req)
{
    SYM("MPI_Ialltoall", 0,
        PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req));
}

/* Allgatherv: every rank knows every amount: the counts are compared,
 * and this rank's own send against its entry. */
static void allgatherv_fp(cm_comm *cc, cohort_check_fp *fp, const void *sendbuf, int sendcount,
                          MPI_Datatype sendtype, const int *recvcounts, MPI_Datatype recvtype,
                          char *args, size_t alen, char *why, size_t wlen)
{
    cm_sig r;
    cm_type_sig(recvtype, &r);
    fp->sig_hash = r.hash;
    fp->sig = r.text;
    counts_args(fp, recvcounts, cc->n, r.m, args, alen, "recvcounts");
    why[0] = 0;
    int me = my_index(cc);
    if (sendbuf != MPI_IN_PLACE && me >= 0) {
        cm_sig a;
        uint64_t na = amount(sendcount, sendtype, &a);
        uint64_t nb = (uint64_t)(recvcounts[me] < 0 ? 0 : recvcounts[me]) * r.m;
        if (na != nb || (na && a.hash != r.hash))
            snprintf(why, wlen,
                     "rank %d sends %llu x %s but recvcounts[%d] x recvtype says %llu x %s - the "
                     "amounts and types must match",
                     me, (unsigned long long)na, a.text ? a.text : "none", me,
                     (unsigned long long)nb, r.text ? r.text : "none");
    }
}

#define AGV(name, flags, pcall)                                                                    \
    CHECKED(comm, pcall);                                                                          \
    cohort_check_fp fp;                                                                            \
    fp_init(&fp, name, CM_PC());                                                                   \
    char why[400], args[200];                                                                      \
    allgatherv_fp(cc, &fp, sendbuf, sendcount, sendtype, recvcounts, recvtype, args, sizeof args, \
                  why, sizeof why);                                                                \
    uint64_t seq = begin(cc, &fp);                                                                 \
    if (why[0])                                                                                    \
        local_fail(cc, &fp, seq, why);                                                             \
    int rc = pcall;                                                                                \
    int me_ = my_index(cc);                                                                        \
    end(cc, seq, me_ >= 0 && recvcounts[(me_ + cc->n - 1) % cc->n] > 0 ? (flags) : 0, rc);        \
    return rc;

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm)
{
    AGV("MPI_Allgatherv", COHORT_CHECK_SYNCED,
        PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                        comm));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *req)
{
    AGV("MPI_Iallgatherv", 0,
        PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                         comm, req));
}

/* Alltoallv / Alltoallw: each pair agrees on its own amounts, which no
 * single rank sees: the operation is compared, and this rank's part to
 * itself is checked locally. */
static void a2av_self(cm_comm *cc, const void *sendbuf, const int *sendcounts,
                      MPI_Datatype sendtype, const int *recvcounts, MPI_Datatype recvtype,
                      char *why, size_t wlen)
{
    why[0] = 0;
    int me = my_index(cc);
    if (sendbuf == MPI_IN_PLACE || me < 0)
        return;
    cm_sig a, b;
    uint64_t na = amount(sendcounts[me], sendtype, &a), nb = amount(recvcounts[me], recvtype, &b);
    if (na != nb || (na && a.hash != b.hash))
        snprintf(why, wlen,
                 "rank %d sends %llu x %s to itself but receives %llu x %s from itself - the "
                 "amounts and types must match",
                 me, (unsigned long long)na, a.text ? a.text : "none", (unsigned long long)nb,
                 b.text ? b.text : "none");
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    CHECKED(comm, PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                 rdispls, recvtype, comm));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Alltoallv", CM_PC());
    char why[400];
    a2av_self(cc, sendbuf, sendcounts, sendtype, recvcounts, recvtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                            recvtype, comm);
    end(cc, seq, 0, rc); /* with zero counts a rank may return without its neighbour */
    return rc;
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req)
{
    CHECKED(comm, PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                  rdispls, recvtype, comm, req));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Ialltoallv", CM_PC());
    char why[400];
    a2av_self(cc, sendbuf, sendcounts, sendtype, recvcounts, recvtype, why, sizeof why);
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                             rdispls, recvtype, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    CHECKED(comm, PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                                 rdispls, recvtypes, comm));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Alltoallw", CM_PC());
    char why[400];
    int me = my_index(cc);
    if (me >= 0 && sendbuf != MPI_IN_PLACE)
        a2av_self(cc, sendbuf, sendcounts, sendtypes[me], recvcounts, recvtypes[me], why,
                  sizeof why);
    else
        why[0] = 0;
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                            recvtypes, comm);
    end(cc, seq, 0, rc);
    return rc;
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *req)
{
    CHECKED(comm, PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                                  rdispls, recvtypes, comm, req));
    cohort_check_fp fp;
    fp_init(&fp, "MPI_Ialltoallw", CM_PC());
    char why[400];
    int me = my_index(cc);
    if (me >= 0 && sendbuf != MPI_IN_PLACE)
        a2av_self(cc, sendbuf, sendcounts, sendtypes[me], recvcounts, recvtypes[me], why,
                  sizeof why);
    else
        why[0] = 0;
    uint64_t seq = begin(cc, &fp);
    if (why[0])
        local_fail(cc, &fp, seq, why);
    int rc = PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                             rdispls, recvtypes, comm, req);
    end(cc, seq, 0, rc);
    return rc;
}
