/* bad_p2p_late_cycle.c - ranks 0 and 1 ping-pong 2000 times (quick
 * blocking sends and receives, which the layer records without publishing),
 * then each waits to receive from the other before sending: the cycle must
 * still be reported (ranks 2 and 3 wait in a barrier). 2000, not 20000: 4
 * ranks on 2 cores, with MPICH's ranks 2 and 3 busy-polling in the barrier,
 * a round trip waits for the two ranks to be scheduled together, and 20000
 * of them took over 120 s in about one run in six (2026-12-02: the ranks'
 * wait counters, read with gdb 12 s into such a run, stood at iteration
 * ~3800 of the ping-pong - still moving, no cycle yet to report). */
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
