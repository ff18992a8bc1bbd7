/* mpi_pingpong.c - the MPI peer of cohort-perf's sendrecv: ranks 0 and 1
 * ping-pong MPI_Send/MPI_Recv; per size, the one-way time (round trip / 2)
 * of each iteration; prints "bytes p50 p99 max mean" in microseconds.
 * Built by bench/compare/p2p_ab.sh with mpicc.openmpi (MPI=1) and
 * mpicc.mpich (MPICH=1).
 * Usage: mpi_pingpong SIZES(comma list) SECONDS_PER_SIZE [oop|ip]
 *   oop: separate send and receive buffers, the send buffer never rewritten
 *        (cohort-perf's out-of-place sendrecv);
 *   ip:  one buffer, each message the one just received (cohort-perf's
 *        in-place sendrecv) - the default, and the only form before
 *        2026-12-04 (session 22), when p2p_ab.sh compared it with
 *        cohort-perf's out-of-place rows: from 16 KiB that flattered cohort,
 *        since a single copy reads lines the other core just wrote. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

/* one round trip: rank 0 sends first, rank 1 answers */
static void round_trip(int rank, char *sbuf, char *rbuf, int b)
{
    if (rank == 0) {
        MPI_Send(sbuf, b, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(rbuf, b, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(rbuf, b, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, b, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *list = argc > 1 ? argv[1] : "8,65536,1048576";
    double secs = argc > 2 ? atof(argv[2]) : 0.1;
    char *dup = strdup(list);
    size_t maxb = 0;
    for (char *p = strtok(dup, ","); p; p = strtok(NULL, ","))
        if ((size_t)atol(p) > maxb)
            maxb = (size_t)atol(p);
    free(dup);
    int oop = argc > 3 && !strcmp(argv[3], "oop");
    char *buf = malloc(maxb ? maxb : 1), *rbuf = oop ? malloc(maxb ? maxb : 1) : buf;
    memset(buf, 1, maxb ? maxb : 1); /* every page touched before timing */
    memset(rbuf, 2, maxb ? maxb : 1);
    if (rank == 0)
        printf("# mpi_pingpong %s\n", oop ? "oop: separate buffers" : "ip: one buffer");
    enum { MAXIT = 200000 };
    double *t = malloc(sizeof(double) * MAXIT);
    dup = strdup(list);
    for (char *p = strtok(dup, ","); p; p = strtok(NULL, ",")) {
        int b = atoi(p);
        for (int w = 0; w < 5; w++) /* warm-up */
            round_trip(rank, buf, rbuf, b);
        int n = 0, go = 1;
        double t0 = MPI_Wtime();
        while (go) {
            double a = MPI_Wtime();
            round_trip(rank, buf, rbuf, b);
            t[n++] = (MPI_Wtime() - a) / 2;
            /* rank 0 decides every 64 iterations whether to stop, so both
             * ranks run the same count (the broadcast is not timed) */
            if ((n & 63) == 0) {
                if (rank == 0)
                    go = MPI_Wtime() - t0 < secs && n + 64 <= MAXIT;
                MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            qsort(t, (size_t)n, sizeof *t, cmp_double);
            double s = 0;
            for (int i = 0; i < n; i++)
                s += t[i];
            printf("%d %.2f %.2f %.1f %.2f\n", b, t[n / 2] * 1e6, t[(int)(n * 0.99)] * 1e6,
                   t[n - 1] * 1e6, s / n * 1e6);
            fflush(stdout);
        }
    }
    free(dup);
    if (rbuf != buf)
        free(rbuf);
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
}
