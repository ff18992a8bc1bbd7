/*
 * mpi_coll_ext.c - the collectives the shared peer harness (mpi_coll_bench.c,
 * /work/shared/peers/coll) leaves out, measured the same way, so that
 * bench/compare/run.sh can put cohort beside Open MPI and MPICH for every
 * collective Open MPI has (issue #14's shared-memory target).
 *
 * Collectives: alltoall (MPI_Alltoall), gather (MPI_Gather), scatter
 * (MPI_Scatter), reduce (MPI_Reduce, float32 MPI_SUM); root 0, float32; and
 * sendrecv, cohort-perf's: a ping-pong (MPI_Send, MPI_Recv) between ranks 2k
 * and 2k+1, an odd rank out idle, its time one way (half the round trip).
 *
 * Same as mpi_coll_bench (and cohort-perf, nccl-tests):
 *   size: "bytes" is the full buffer - alltoall: the send (= receive) buffer of
 *     every rank, n blocks of bytes/n; gather: the root's receive buffer (each
 *     rank sends bytes/n); scatter: the root's send buffer (each rank receives
 *     bytes/n); reduce, sendrecv: the buffer. Per-rank blocks round down to whole floats,
 *     at least one; the row's bytes are what was moved (per * n * 4).
 *   algbw = bytes / time; busbw = algbw * factor: alltoall, gather, scatter
 *     (n-1)/n, reduce and sendrecv 1 (cohort-perf's perf_busfactor).
 *   time: the max over ranks of the per-rank mean time per op (lat_us), and the
 *     min over ranks (min_rank_us); ops back to back, or with -o OSU style (a
 *     barrier between ops, only the op timed).
 *   calibration: warmup batches of -w ops that grow x4 until one takes >= t/10
 *     (slowest rank), then iters = t / (slowest rank's time per op), 5..200000.
 *   a check of one call's result before timing each size ("ok" / "FAIL").
 *   output: the same header lines and columns, one row per size and repeat.
 *
 * Every buffer is written (non-zero values) before anything is timed: no
 * page is first touched inside a timed call (no zero-page effects).
 *
 * Usage: mpirun -n N ./mpi_coll_ext [-c alltoall,gather,scatter,reduce,sendrecv]
 *          [-b minbytes] [-e maxbytes] [-f factor] [-s size,size,...] [-t seconds]
 *          [-w warmup] [-o] [-r repeats] [-l label]
 * (-c also takes cohort's name all_to_all.)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { X_ALLTOALL, X_GATHER, X_SCATTER, X_REDUCE, X_SENDRECV, X_N };
static const char *const xname[X_N] = {"alltoall", "gather", "scatter", "reduce", "sendrecv"};

static int me, np;
static double budget_s = 0.3;
static int nwarm = 5;
static int osu = 0;
static float *src, *dst;

static double bus_factor(int c, int n)
{
    return c == X_REDUCE || c == X_SENDRECV ? 1.0 : (double)(n - 1) / n;
}

/* Elements per rank block for the per-rank ops, the whole count for reduce. */
static size_t block_of(int c, size_t bytes)
{
    size_t elems = bytes / sizeof(float);
    if (elems < 1)
        elems = 1;
    if (c == X_REDUCE || c == X_SENDRECV)
        return elems;
    size_t per = elems / (size_t)np;
    return per < 1 ? 1 : per;
}

/* Bytes the row reports: the full buffer of the count actually moved. */
static size_t full_bytes(int c, size_t blk)
{
    return (c == X_REDUCE || c == X_SENDRECV ? blk : blk * (size_t)np) * sizeof(float);
}

static void call(int c, size_t blk)
{
    int k = (int)blk;
    switch (c) {
    case X_ALLTOALL:
        MPI_Alltoall(src, k, MPI_FLOAT, dst, k, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case X_GATHER:
        MPI_Gather(src, k, MPI_FLOAT, dst, k, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case X_SCATTER:
        MPI_Scatter(src, k, MPI_FLOAT, dst, k, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case X_REDUCE:
        MPI_Reduce(src, dst, k, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case X_SENDRECV: {
        int partner = me % 2 == 0 ? me + 1 : me - 1;
        if (partner >= np)
            break;
        if (me % 2 == 0) {
            MPI_Send(src, k, MPI_FLOAT, partner, 0, MPI_COMM_WORLD);
            MPI_Recv(dst, k, MPI_FLOAT, partner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(dst, k, MPI_FLOAT, partner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(src, k, MPI_FLOAT, partner, 0, MPI_COMM_WORLD);
        }
        break;
    }
    }
}

/* This rank's mean seconds per op over `iters` ops. */
static double run_batch(int c, size_t blk, long iters)
{
    double sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (osu) {
        for (long i = 0; i < iters; i++) {
            double t0 = MPI_Wtime();
            call(c, blk);
            sum += MPI_Wtime() - t0;
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else {
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++)
            call(c, blk);
        sum = MPI_Wtime() - t0;
    }
    return sum / (double)iters;
}

/* One untimed call with known inputs; 1 on every rank if any rank saw a wrong value.
 * Inputs: element e of block j of rank r's send buffer is 1 + r * np + j (exact in
 * float for any rank count mpirun can start here), so each received block names
 * its sender and its destination. */
static int check_once(int c, size_t blk)
{
    size_t n = (size_t)np, sendn, recvn;
    switch (c) {
    case X_ALLTOALL: sendn = recvn = blk * n; break;
    case X_GATHER: sendn = blk; recvn = me == 0 ? blk * n : 0; break;
    case X_SCATTER: sendn = me == 0 ? blk * n : 0; recvn = blk; break;
    case X_SENDRECV: sendn = blk; recvn = (me ^ 1) < np ? blk : 0; break;
    default: sendn = blk; recvn = me == 0 ? blk : 0; break;
    }
    for (size_t i = 0; i < sendn; i++) {
        size_t j = c == X_GATHER || c == X_REDUCE || c == X_SENDRECV ? 0 : i / blk;
        src[i] = (float)(1 + (size_t)me * n + j);
    }
    for (size_t i = 0; i < recvn; i++)
        dst[i] = -1.0f;
    call(c, blk);
    int bad = 0;
    size_t step = recvn > 4096 ? 61 : 1;
    for (size_t i = 0; i < recvn && !bad; i += step) {
        size_t j = i / blk; /* the block: its sender (alltoall, gather) */
        float want;
        switch (c) {
        case X_ALLTOALL: want = (float)(1 + j * n + (size_t)me); break;
        case X_GATHER: want = (float)(1 + j * n); break;
        case X_SCATTER: want = (float)(1 + (size_t)me); break; /* root 0, block me */
        case X_SENDRECV: want = (float)(1 + (size_t)(me ^ 1) * n); break; /* the partner's */
        default: want = (float)(n + n * n * (n - 1) / 2); break; /* sum of 1 + r*n */
        }
        if (dst[i] != want)
            bad = 1;
    }
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static int parse_ops(const char *arg, int *use)
{
    char *s = strdup(arg), *sp = NULL;
    int ok = 1;
    for (int i = 0; i < X_N; i++)
        use[i] = 0;
    for (char *tok = strtok_r(s, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp)) {
        int hit = 0;
        for (int i = 0; i < X_N; i++)
            if (!strcmp(tok, xname[i]) || (i == X_ALLTOALL && !strcmp(tok, "all_to_all")))
                use[i] = hit = 1;
        if (!hit) {
            if (me == 0)
                fprintf(stderr,
                        "mpi_coll_ext: unknown collective %s (alltoall gather scatter reduce "
                        "sendrecv)\n",
                        tok);
            ok = 0;
        }
    }
    free(s);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);

    int use[X_N] = {1, 1, 1, 1, 1};
    size_t lo = 8, hi = (size_t)64 << 20, mul = 4, sizes[64];
    int nsz = 0, reps = 1, opt;
    const char *label = "";
    while ((opt = getopt(argc, argv, "c:b:e:f:s:t:w:or:l:")) != -1) {
        switch (opt) {
        case 'c':
            if (!parse_ops(optarg, use)) {
                MPI_Finalize();
                return 2;
            }
            break;
        case 'b': lo = strtoull(optarg, NULL, 0); break;
        case 'e': hi = strtoull(optarg, NULL, 0); break;
        case 'f': mul = strtoull(optarg, NULL, 0); break;
        case 's': {
            char *s = strdup(optarg), *sp = NULL;
            for (char *tok = strtok_r(s, ",", &sp); tok && nsz < 64; tok = strtok_r(NULL, ",", &sp))
                sizes[nsz++] = strtoull(tok, NULL, 0);
            free(s);
            break;
        }
        case 't': budget_s = atof(optarg); break;
        case 'w': nwarm = atoi(optarg); break;
        case 'o': osu = 1; break;
        case 'r': reps = atoi(optarg); break;
        case 'l': label = optarg; break;
        default:
            MPI_Finalize();
            return 2;
        }
    }
    if (mul < 2)
        mul = 4;
    if (nsz == 0) { /* as mpi_coll_bench: minbytes, then powers of the factor from 16 B */
        sizes[nsz++] = lo;
        for (size_t s = 16; s <= hi && nsz < 64; s *= mul)
            if (s > lo)
                sizes[nsz++] = s;
    }
    size_t top = 0;
    for (int i = 0; i < nsz; i++)
        if (sizes[i] > top)
            top = sizes[i];
    /* the largest buffer any op uses: max(bytes/4, np) floats (one float a block at least) */
    size_t cap = top / sizeof(float) + (size_t)np;
    size_t alloc = (cap * sizeof(float) + 4095) / 4096 * 4096;
    src = aligned_alloc(4096, alloc);
    dst = aligned_alloc(4096, alloc);
    if (!src || !dst) {
        fprintf(stderr, "mpi_coll_ext: rank %d: cannot allocate 2 x %zu B\n", me, alloc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Touch every page with non-zero data before anything is timed. */
    for (size_t i = 0; i < cap; i++) {
        src[i] = 1.0f;
        dst[i] = 2.0f;
    }

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\n")] = 0;
    lib[strcspn(lib, ",")] = 0;
    if (me == 0) {
        printf("# mpi_coll_ext %s\n# library: %s\n# ranks: %d  target_s/size: %.2f  warmup: %d  mode: %s\n",
               label, lib, np, budget_s, nwarm, osu ? "osu(barrier-separated)" : "back-to-back");
        printf("# size convention: nccl-tests (full buffer bytes); lat = max over ranks of per-rank avg\n");
        printf("%-15s %12s %8s %12s %12s %10s %10s %5s %s\n", "coll", "bytes", "ranks", "lat_us",
               "min_rank_us", "algbw_GBs", "busbw_GBs", "rep", "check");
        fflush(stdout);
    }

    for (int c = 0; c < X_N; c++) {
        if (!use[c])
            continue;
        for (int si = 0; si < nsz; si++) {
            size_t blk = block_of(c, sizes[si]), bytes = full_bytes(c, blk);
            int bad = check_once(c, blk);
            /* calibrate: grow the warmup batch until the slowest rank spends >= t/10 in it */
            long k = nwarm > 0 ? nwarm : 1;
            double mine, slowest;
            for (;;) {
                mine = run_batch(c, blk, k);
                MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (slowest * (double)k >= budget_s / 10 || k >= 200000)
                    break;
                k *= 4;
            }
            long iters = (long)(budget_s / (slowest > 1e-9 ? slowest : 1e-9));
            if (iters < 5)
                iters = 5;
            if (iters > 200000)
                iters = 200000;
            for (int r = 0; r < reps; r++) {
                /* a ping-pong's op is a round trip: one way is half */
                double t = run_batch(c, blk, iters) * (c == X_SENDRECV ? 0.5 : 1.0), tmax, tmin;
                MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                if (me == 0) {
                    double algbw = (double)bytes / tmax / 1e9;
                    printf("%-15s %12zu %8d %12.2f %12.2f %10.3f %10.3f %5d %s iters=%ld\n", xname[c],
                           bytes, np, tmax * 1e6, tmin * 1e6, algbw, algbw * bus_factor(c, np), r,
                           bad ? "FAIL" : "ok", iters);
                    fflush(stdout);
                }
            }
        }
    }
    free(src);
    free(dst);
    MPI_Finalize();
    return 0;
}
