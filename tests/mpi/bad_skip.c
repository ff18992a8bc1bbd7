/* bad_skip.c - rank 3 skips an MPI_Bcast the others make. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static float a[64], b[64];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(a, b, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 3)
        MPI_Bcast(a, 64, MPI_FLOAT, 0, MPI_COMM_WORLD); /* skipped by rank 3 */
    MPI_Allreduce(a, b, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
