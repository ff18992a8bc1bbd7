/* bad_nonblocking.c - rank 3 starts an MPI_Iallreduce with another count
 * than the others; the mismatch is found although the call returns at once
 * (checked at the call, in call order). */
#include <mpi.h>

int main(int argc, char **argv)
{
    static double a[1024], b[1024];
    int rank;
    MPI_Request r[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
    MPI_Iallreduce(a, b, rank == 3 ? 1000 : 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[1]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
