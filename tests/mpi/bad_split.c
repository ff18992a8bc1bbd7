/* bad_split.c - a mismatch inside a communicator from MPI_Comm_split:
 * among the odd ranks (1 and 3), rank 3 reduces 8 elements and rank 1
 * reduces 16. Three ranks per colour with 6 ranks would give a majority;
 * with 4 ranks the report has no majority and blames nobody. */
#include <mpi.h>

int main(int argc, char **argv)
{
    static int a[16], b[16];
    int rank;
    MPI_Comm half;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Allreduce(a, b, 16, MPI_INT, MPI_SUM, half);
    MPI_Reduce(a, b, rank == 3 ? 8 : 16, MPI_INT, MPI_SUM, 0, half);
    MPI_Barrier(half);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
