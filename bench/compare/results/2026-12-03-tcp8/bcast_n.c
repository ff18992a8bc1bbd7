/* fixed-count MPI_Bcast loop for strace counting: bcast_n SIZE N */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    size_t sz = strtoull(argv[1], 0, 0);
    int n = atoi(argv[2]), r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    char *b = calloc(1, sz ? sz : 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++)
        MPI_Bcast(b, (int)sz, MPI_BYTE, 0, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d: %.2f us/call\n", r, (t1 - t0) * 1e6 / n);
    MPI_Finalize();
    return 0;
}
