/* bench_mpi.c - per-call time of MPI_Allreduce and MPI_Bcast at 8 B, 4 KiB,
 * 64 KiB and 1 MiB, as rank 0 sees it (back-to-back calls, each timed),
 * for the interleaved bare vs libcohort-mpi comparison (run.sh). Prints one
 * line per (op, size): p50, p99, max and mean in microseconds.
 * Arguments: [scale [allreduce|bcast [size]]] - the iteration scale and,
 * optionally, the one cell to run (selftime.sh profiles cell by cell).
 * BENCH_MPI_CELL_S=<s>: at most about s seconds of timed calls per cell
 * (and a warm-up of at most 20 calls): rank 0 times the warm-up and
 * broadcasts the count, so every rank makes the same calls. For ranks that
 * outnumber the cores, where one call can take milliseconds. */
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
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const char *only_op = argc > 2 ? argv[2] : NULL;
    long only_size = argc > 3 ? atol(argv[3]) : 0;
    const size_t sizes[] = {8, 4096, 65536, 1 << 20};
    const int iters[] = {20000, 10000, 2000, 200};
    const char *cs = getenv("BENCH_MPI_CELL_S");
    double cell_s = cs ? atof(cs) : 0;
    char *a = calloc(1, 1 << 20), *b = calloc(1, 1 << 20);
    double *t = malloc(sizeof(double) * 20000);
    for (int op = 0; op < 2; op++)
        for (int s = 0; s < 4; s++) {
            if ((only_op && strcmp(only_op, op ? "bcast" : "allreduce")) ||
                (only_size && (size_t)only_size != sizes[s]))
                continue;
            int n = (int)(iters[s] * scale);
            if (n < 20)
                n = 20;
            int count = (int)(sizes[s] / sizeof(float));
            if (count < 2)
                count = 2; /* 8 B */
            int warm = n / 10 + 5;
            if (cell_s > 0 && warm > 20)
                warm = 20;
            double w0 = MPI_Wtime();
            for (int w = 0; w < warm; w++) /* warm-up */
                op ? MPI_Bcast(a, count, MPI_FLOAT, 0, MPI_COMM_WORLD)
                   : MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (cell_s > 0) {
                double per = (MPI_Wtime() - w0) / warm;
                if (per > 0 && cell_s / per < n)
                    n = cell_s / per < 50 ? 50 : (int)(cell_s / per);
                MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < n; i++) {
                double t0 = MPI_Wtime();
                op ? MPI_Bcast(a, count, MPI_FLOAT, 0, MPI_COMM_WORLD)
                   : MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                t[i] = (MPI_Wtime() - t0) * 1e6;
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                double sum = 0;
                for (int i = 0; i < n; i++)
                    sum += t[i];
                qsort(t, (size_t)n, sizeof *t, cmp);
                printf("%s %zu p50 %.3f p99 %.3f max %.3f mean %.3f n %d\n",
                       op ? "bcast" : "allreduce", sizes[s], t[n / 2], t[(int)(n * 0.99)],
                       t[n - 1], sum / n, n);
            }
        }
    free(a), free(b), free(t);
    MPI_Finalize();
    return 0;
}
