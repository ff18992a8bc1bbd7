/* bad_op.c - rank 3 reduces with MPI_MAX where the others use MPI_SUM. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static double a[256], b[256];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(a, b, 256, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(a, b, 256, MPI_DOUBLE, rank == 3 ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
