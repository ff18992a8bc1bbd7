/*
 * shm_micro.c - latency/bandwidth of the shm collectives, in the same
 * conventions as the peer harness (/work/shared/peers/coll/mpi_coll_bench.c)
 * so the numbers compare directly with Open MPI / MPICH:
 *   - sizes are nccl-tests "full buffer" bytes (allgather: total output,
 *     reduce_scatter: total input), float32, SUM;
 *   - ops back to back; per size the iteration count is calibrated to about
 *     -t seconds after warm-up batches that grow x4 until one takes t/10;
 *   - lat = max over ranks of the per-rank average; busbw = bytes/lat x
 *     2(n-1)/n (allreduce), (n-1)/n (allgather, reduce_scatter), 1 (bcast).
 * Also p50/p99 of single ops (max over ranks), from one clock read per op.
 *
 * usage: shm_micro [-n ranks] [-c allreduce,bcast,allgather,reduce_scatter,barrier]
 *                  [-b min] [-e max] [-f factor] [-s size,size] [-t seconds] [-B]
 *   -B pins rank r to the r-th CPU of the affinity mask (Open MPI binds 2
 *      ranks to cores by default; cohort does not).
 */
#include <arpa/inet.h>
#include <math.h>
#include <sched.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { C_ALLREDUCE, C_BCAST, C_ALLGATHER, C_REDSCAT, C_BARRIER, C_N };
static const char *cname[C_N] = {"allreduce", "bcast", "allgather", "reduce_scatter", "barrier"};

static int nranks = 2;
static int bind_cpus;
static double target_s = 0.3;
static float *sbuf, *rbuf;
static double *lat;
static long lat_cap;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double busfactor(int c, int n)
{
    switch (c) {
    case C_ALLREDUCE: return 2.0 * (n - 1) / n;
    case C_ALLGATHER:
    case C_REDSCAT: return (double)(n - 1) / n;
    case C_BCAST: return 1.0;
    default: return 0.0;
    }
}

static cohort_status do_op(cohort_group *g, int c, size_t count)
{
    size_t per = count / (size_t)nranks;
    coh_call call;
    switch (c) {
    case C_ALLREDUCE:
        call = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, count);
        return coh_shm_all_reduce(g->shm, &call, sbuf, rbuf, count);
    case C_BCAST:
        call = th_call(g, COH_COLL_BROADCAST, COHORT_FLOAT32, -1, 0, count);
        return coh_shm_broadcast(g->shm, &call, rbuf, count * 4, 0);
    case C_ALLGATHER:
        call = th_call(g, COH_COLL_ALL_GATHER, COHORT_FLOAT32, -1, -1, per);
        return coh_shm_all_gather(g->shm, &call, sbuf, rbuf, per * 4);
    case C_REDSCAT:
        call = th_call(g, COH_COLL_REDUCE_SCATTER, COHORT_FLOAT32, COHORT_SUM, -1, per);
        return coh_shm_reduce_scatter(g->shm, &call, sbuf, rbuf, per);
    default:
        call = th_call(g, COH_COLL_BARRIER, COHORT_FLOAT32, -1, -1, 0);
        return coh_shm_barrier(g->shm, &call);
    }
}

static void barrier(cohort_group *g)
{
    coh_call call = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
    if (coh_shm_barrier(g->shm, &call) != COHORT_OK) {
        fprintf(stderr, "barrier failed: %s\n", g->err.msg);
        exit(1);
    }
}

static long bcast_long(cohort_group *g, long v)
{
    coh_call call = th_call(g, COH_COLL_BROADCAST, COHORT_INT64, -1, 0, 1);
    coh_shm_broadcast(g->shm, &call, &v, sizeof v, 0);
    return v;
}

static int verify(cohort_group *g, int c, size_t count)
{
    int me = g->local_rank;
    size_t per = count / (size_t)nranks;
    size_t n = (c == C_ALLREDUCE || c == C_BCAST) ? count : (c == C_ALLGATHER ? per * nranks : per);
    size_t sn = c == C_ALLGATHER ? per : count;
    for (size_t i = 0; i < sn; i++)
        sbuf[i] = (float)(me + 1);
    for (size_t i = 0; i < n; i++)
        rbuf[i] = (c == C_BCAST && me == 0) ? 7.0f : -1.0f;
    if (do_op(g, c, count) != COHORT_OK)
        return 1;
    float sum = (float)nranks * (nranks + 1) / 2;
    for (size_t i = 0; i < n; i++) {
        float e = (c == C_ALLREDUCE || c == C_REDSCAT) ? sum
                  : c == C_BCAST                      ? 7.0f
                                                      : (float)(i / per + 1);
        if (rbuf[i] != e)
            return 1;
    }
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_size(cohort_group *g, int c, size_t bytes)
{
    th_shared *sh = th_sh();
    int me = g->local_rank;
    size_t count = bytes / 4;
    if (c != C_BARRIER && count < 1)
        count = 1;
    if (c == C_ALLGATHER || c == C_REDSCAT) {
        size_t per = count / (size_t)nranks;
        count = (per ? per : 1) * (size_t)nranks;
    }
    size_t realbytes = c == C_BARRIER ? 0 : count * 4;
    int bad = c == C_BARRIER ? 0 : verify(g, c, count);
    sh->val[me] = bad;
    barrier(g);
    for (int r = 0; r < nranks; r++)
        bad |= (int)sh->val[r];
    barrier(g);
    /* calibration, decided by rank 0 */
    long k = 5;
    double per_op;
    for (;;) {
        barrier(g);
        double t0 = now_s();
        for (long i = 0; i < k; i++)
            do_op(g, c, count);
        double tw = now_s() - t0;
        long ok = bcast_long(g, tw >= target_s / 10 ? 1 : 0);
        per_op = tw / k;
        if (ok)
            break;
        k *= 4;
    }
    long iters = (long)(target_s / (per_op > 0 ? per_op : 1e-7));
    if (iters < 5)
        iters = 5;
    iters = bcast_long(g, iters);
    if (iters > lat_cap) {
        free(lat);
        lat_cap = iters;
        lat = malloc((size_t)lat_cap * sizeof *lat);
    }
    barrier(g);
    double t0 = now_s(), prev = t0;
    for (long i = 0; i < iters; i++) {
        cohort_status st = do_op(g, c, count);
        if (st != COHORT_OK) {
            fprintf(stderr, "rank %d: %s: %s\n", me, cohort_status_name(st), g->err.msg);
            exit(1);
        }
        double t = now_s();
        lat[i] = t - prev;
        prev = t;
    }
    double avg = (prev - t0) / iters;
    qsort(lat, (size_t)iters, sizeof *lat, cmp_d);
    double p50 = lat[iters / 2], p99 = lat[(long)(iters * 0.99)], mx = lat[iters - 1];
    sh->val[me * 4 + 0] = (int64_t)(avg * 1e10);
    sh->val[me * 4 + 1] = (int64_t)(p50 * 1e10);
    sh->val[me * 4 + 2] = (int64_t)(p99 * 1e10);
    sh->val[me * 4 + 3] = (int64_t)(mx * 1e10);
    barrier(g);
    if (me == 0) {
        double a = 0, mn = 1e30, q50 = 0, q99 = 0, qmax = 0;
        for (int r = 0; r < nranks; r++) {
            double v = sh->val[r * 4] / 1e10;
            a = fmax(a, v);
            mn = fmin(mn, v);
            q50 = fmax(q50, sh->val[r * 4 + 1] / 1e10);
            q99 = fmax(q99, sh->val[r * 4 + 2] / 1e10);
            qmax = fmax(qmax, sh->val[r * 4 + 3] / 1e10);
        }
        double algbw = realbytes / a / 1e9;
        printf("%-15s %12zu %6d %10.2f %10.2f %10.2f %10.2f %11.1f %9.2f %9.2f %8ld %s\n",
               cname[c], realbytes, nranks, a * 1e6, mn * 1e6, q50 * 1e6, q99 * 1e6, qmax * 1e6,
               algbw, algbw * busfactor(c, nranks), iters, bad ? "BAD" : "ok");
        fflush(stdout);
    }
    barrier(g);
}

static int use[C_N] = {1, 0, 0, 0, 0};
static size_t sizes[64];
static int nsizes;

static int rank_main(int rank)
{
    cohort_status st;
    cohort_group *g = th_group(rank, nranks, 60000, &st);
    if (!g)
        return 1;
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++)
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    size_t cap = (maxb / 4 + (size_t)nranks) * 4;
    sbuf = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
    rbuf = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
    memset(sbuf, 0, cap);
    memset(rbuf, 0, cap);
    for (int c = 0; c < C_N; c++) {
        if (!use[c])
            continue;
        int ns = c == C_BARRIER ? 1 : nsizes;
        for (int i = 0; i < ns; i++)
            run_size(g, c, c == C_BARRIER ? 0 : sizes[i]);
    }
    th_group_free(g);
    th_done(nranks);
    return 0;
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 64u << 20, factor = 4;
    int opt;
    while ((opt = getopt(argc, argv, "n:c:b:e:f:s:t:B")) != -1) {
        switch (opt) {
        case 'B': bind_cpus = 1; break;
        case 'n': nranks = atoi(optarg); break;
        case 'c': {
            memset(use, 0, sizeof use);
            char *s = strdup(optarg), *sp, *tok;
            for (tok = strtok_r(s, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp))
                for (int i = 0; i < C_N; i++)
                    if (!strcmp(tok, cname[i]))
                        use[i] = 1;
            free(s);
            break;
        }
        case 'b': minb = strtoull(optarg, NULL, 0); break;
        case 'e': maxb = strtoull(optarg, NULL, 0); break;
        case 'f': factor = strtoull(optarg, NULL, 0); break;
        case 's': {
            char *s = strdup(optarg), *sp, *tok;
            for (tok = strtok_r(s, ",", &sp); tok && nsizes < 64; tok = strtok_r(NULL, ",", &sp))
                sizes[nsizes++] = strtoull(tok, NULL, 0);
            free(s);
            break;
        }
        case 't': target_s = atof(optarg); break;
        default: fprintf(stderr, "see the header of shm_micro.c\n"); return 2;
        }
    }
    if (nranks < 1 || nranks > 16) {
        fprintf(stderr, "-n: 1..16\n");
        return 2;
    }
    if (!nsizes) {
        sizes[nsizes++] = minb;
        for (size_t s = 16; s <= maxb && nsizes < 64; s *= factor)
            if (s > minb)
                sizes[nsizes++] = s;
    }
    char job[64];
    snprintf(job, sizeof job, "shm-micro-%d", (int)getpid());
    setenv("COHORT_JOB_ID", job, 1);
    setenv("COHORT_TOKEN", "shm-micro-token", 1);
    /* Rank 0 hosts the store on a free port (no thread in this process
     * before the fork). */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0 || !th_shared_init()) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
    close(lfd);
    setenv("MASTER_PORT", port, 1);
    printf("# shm_micro: ranks %d, target %.2f s/size, back-to-back, float32 sum%s\n", nranks,
           target_s, bind_cpus ? ", bound to cpus" : "");
    printf("%-15s %12s %6s %10s %10s %10s %10s %11s %9s %9s %8s %s\n", "coll", "bytes", "ranks",
           "lat_us", "min_rk_us", "p50_us", "p99_us", "max_us", "algbw", "busbw", "iters", "check");
    fflush(stdout);
    pid_t pids[16];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            if (bind_cpus) {
                cpu_set_t all, one;
                sched_getaffinity(0, sizeof all, &all);
                int k = r % CPU_COUNT(&all), c = -1;
                for (int i = 0; i < CPU_SETSIZE && k >= 0; i++)
                    if (CPU_ISSET(i, &all) && k-- == 0)
                        c = i;
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                sched_setaffinity(0, sizeof one, &one);
            }
            char rs[16];
            snprintf(rs, sizeof rs, "%d", r);
            setenv("RANK", rs, 1);
            _exit(rank_main(r));
        }
    }
    int rc = 0;
    for (int r = 0; r < nranks; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            rc = 1;
    }
    return rc;
}
