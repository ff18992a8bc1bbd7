/* bad_root.c - rank 3 believes rank 1 is the root of a broadcast whose
 * root is rank 0 for everybody else. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static int a[4096];
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(a, 4096, MPI_INT, rank == 3 ? 1 : 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
