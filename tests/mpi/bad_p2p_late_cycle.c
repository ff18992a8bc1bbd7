/* bad_p2p_late_cycle.c - ranks 0 and 1 ping-pong 2000 times (quick
 * blocking sends and receives, which the layer records without publishing),
 * then each waits to receive from the other before sending: the cycle must
 * still be reported (ranks 2 and 3 wait in a barrier; why 2000: run_broken.sh). */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank < 2) {
        int peer = 1 - rank;
        for (int i = 0; i < 2000; i++) {
            if (rank == 0) {
                MPI_Send(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(&y, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&y, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
            }
        }
        MPI_Recv(&y, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
