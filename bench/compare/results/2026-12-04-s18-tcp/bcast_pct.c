/* bcast_pct.c - back-to-back MPI_Bcast / MPI_Allgather of B bytes, each rank's
 * per-call times: mean, p50, p99, max (us), max over ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *op = argc > 1 ? argv[1] : "bcast";
    size_t bytes = argc > 2 ? strtoul(argv[2], 0, 0) : 1 << 20;
    int iters = argc > 3 ? atoi(argv[3]) : 2000;
    char *buf = malloc(bytes), *out = malloc(bytes);
    memset(buf, rank + 1, bytes);
    double *t = malloc(sizeof(double) * iters);
    for (int w = 0; w < 50; w++)
        if (!strcmp(op, "bcast")) MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        else MPI_Allgather(buf, (int)(bytes / n), MPI_BYTE, out, (int)(bytes / n), MPI_BYTE, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        double a = MPI_Wtime();
        if (!strcmp(op, "bcast")) MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        else MPI_Allgather(buf, (int)(bytes / n), MPI_BYTE, out, (int)(bytes / n), MPI_BYTE, MPI_COMM_WORLD);
        t[i] = (MPI_Wtime() - a) * 1e6;
    }
    double total = (MPI_Wtime() - t0) * 1e6 / iters;
    qsort(t, iters, sizeof *t, cmp);
    double mine[4] = {total, t[iters / 2], t[iters * 99 / 100], t[iters - 1]}, mx[4];
    MPI_Reduce(mine, mx, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    printf("rank %d %s %zu: mean %.1f p50 %.1f p99 %.1f max %.1f\n", rank, op, bytes, mine[0], mine[1], mine[2], mine[3]);
    if (!rank)
        printf("max-over-ranks %s %zu: mean %.1f p50 %.1f p99 %.1f max %.1f\n", op, bytes, mx[0], mx[1], mx[2], mx[3]);
    MPI_Finalize();
    return 0;
}
