/* bad_extra.c - rank 3 makes one MPI_Allreduce more than the others (an
 * `if` the others do not take) before the common MPI_Barrier. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static float a[64], b[64];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(a, b, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 3)
        MPI_Allreduce(a, b, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* the extra call */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(a, b, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
