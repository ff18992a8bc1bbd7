/* bad_operation.c - rank 3 calls MPI_Allgather where the others call
 * MPI_Allreduce with the same amount of data. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static int a[1024], b[4096];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 3)
        MPI_Allgather(a, 1024, MPI_INT, b, 1024, MPI_INT, MPI_COMM_WORLD);
    else
        MPI_Allreduce(a, b, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
