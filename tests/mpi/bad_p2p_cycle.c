/* bad_p2p_cycle.c - ranks 0 and 1 each wait to receive from the other
 * before sending: a deadlock cycle (ranks 2 and 3 wait in a barrier). */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank < 2) {
        int peer = 1 - rank;
        MPI_Recv(&y, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
